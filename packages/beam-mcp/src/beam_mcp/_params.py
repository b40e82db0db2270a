"""The params of every MCP method as pydantic models, and the one `-32602` formatter for them.

Each model is closed (an undeclared member is an error) and strict (no string-to-number or string-to-bool
coercion). `parse(model, params, what)` is the only place request params are validated; the method handlers in
`server` receive the model. Values the client chose that are echoed back verbatim (a progress token such as
`1.50`) are kept as decoded. This module must not know protocol families or state.
"""

from __future__ import annotations

from typing import Annotated, Any, TypeVar

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, field_validator

from ._protocol import LogLevel
from .errors import invalid_params, params_error

P = TypeVar("P", bound="Params")

MRTR_REJECTED = (
    "{method} does not accept inputResponses or requestState: Beam never returns an input_required result, so "
    "there is no multi round-trip request to continue"
)


class _Closed(BaseModel):
    # Validators are built on first use: only `Params` is needed before discovery is answered.
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, defer_build=True)


class Params(_Closed):
    """Params of a method: `_meta` (an object) and nothing else unless declared."""

    meta: dict[str, Any] | None = Field(None, alias="_meta")


class ClientInfo(BaseModel):
    """`Implementation`: a name and a version (other members, like `title`, are accepted and ignored)."""

    model_config = ConfigDict(extra="allow", strict=True, frozen=True, defer_build=True)

    name: str
    version: str


class InitializeParams(Params):
    """`initialize` (legacy)."""

    protocolVersion: str
    capabilities: dict[str, Any]
    clientInfo: ClientInfo


class SetLevelParams(Params):
    """`logging/setLevel` (legacy)."""

    level: LogLevel


class ListParams(Params):
    """`tools/list`, `resources/list`, `resources/templates/list` (an explicit `null` cursor is invalid)."""

    cursor: str | None = None

    @field_validator("cursor", mode="before")
    @classmethod
    def _given_means_string(cls, value: Any) -> Any:
        if value is None:
            raise ValueError("Input should be a valid string")
        return value


def _token(value: Any) -> Any:
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise ValueError("must be a string or a number")
    return value


ProgressToken = Annotated[Any, AfterValidator(_token)]


class CallMeta(BaseModel):
    """`tools/call` `_meta`: the progress token (a string or number, echoed verbatim) and anything else."""

    model_config = ConfigDict(extra="allow", strict=True, frozen=True, defer_build=True)

    progressToken: ProgressToken = None  # an explicit null is invalid (the validator runs on given values only)


class _Continuable(Params):
    """A request that MRTR could continue: Beam recognizes the continuation fields but never accepts them."""

    inputResponses: Any = None
    requestState: Any = None

    def continuation(self) -> bool:
        """Whether the client sent `inputResponses` or `requestState`."""
        return bool({"inputResponses", "requestState"} & self.model_fields_set)


class CallParams(_Continuable):
    """`tools/call`; a `task` member is ignored (Beam does not support tasks)."""

    meta: CallMeta | None = Field(None, alias="_meta")  # type: ignore[assignment]
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    task: Any = None


class ReadParams(_Continuable):
    """`resources/read`."""

    uri: str


class UriParams(Params):
    """`resources/subscribe`, `resources/unsubscribe`."""

    uri: str


class ListenNotifications(BaseModel):
    """What a `subscriptions/listen` stream asks for (unknown kinds are ignored)."""

    model_config = ConfigDict(extra="allow", strict=True, frozen=True, defer_build=True)

    toolsListChanged: bool | None = None
    promptsListChanged: bool | None = None
    resourcesListChanged: bool | None = None
    resourceSubscriptions: list[str] = Field(default_factory=list)


class ListenParams(Params):
    """`subscriptions/listen` (modern)."""

    notifications: ListenNotifications


def parse(model: type[P], params: Any, what: str) -> P:
    """Validate a request's params (absent params are `{}`).

    Raises:
        JsonRpcError: `-32602` naming each problem.
    """
    if params is None:
        params = {}
    if not isinstance(params, dict):
        raise invalid_params(f"{what} params must be an object")
    try:
        return model.model_validate(params)
    except ValidationError as exc:
        raise params_error(what, exc) from None
