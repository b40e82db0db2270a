"""Operation handlers on documents: sync, navigation, goals, save, outline, completions, workspaces."""
