"""The `lean-beam` command line: arguments, rendering for people, the daemon and its client, doctor, completion."""
