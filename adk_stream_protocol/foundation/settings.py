"""Settings, read from the environment (prefix ``ADK_STREAM_``) or passed to ``create_app``."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from adk_stream_protocol.foundation.model_names import OFFLINE_MODEL_NAME, is_offline_model

DEFAULT_SESSION_STORE = "sqlite:///.adk-stream/{app}.db"
DEFAULT_STATE_PREFIX = "ui:"


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="ADK_STREAM_", extra="ignore")

    # Where chats live. `sqlite:///path.db` (embedded, the default), `memory://`, or
    # `postgresql+asyncpg://user@host/db` (ADK's DatabaseSessionService; the `postgres` extra).
    # `{app}` stands for the app's name: by default each app has a file of its own
    # (docs/adr/0024-store-per-app.md; sessions.store_url).
    session_store: str = DEFAULT_SESSION_STORE
    # Where artifacts that tools save live (docs/adr/0025): `memory://` (this process only),
    # `file://DIR` (a directory; several instances need it on a shared filesystem), or
    # `gs://BUCKET` (Google Cloud Storage; needs `google-cloud-storage`).
    artifact_store: str = "memory://"
    # What `load_memory` and `preload_memory` search (docs/adr/0063), in the URI forms of
    # `adk api_server --memory_service_uri`: `memory://` (this process, ADK's keyword search),
    # `sqlite:///FILE.db`, `rag://CORPUS` or `agentengine://ID` (Vertex AI), or a scheme
    # registered with ADK's service registry. The agent adds to it (its callback calls
    # `add_session_to_memory`), as on ADK's servers.
    memory_store: str = "memory://"
    # A saved artifact up to this many bytes reaches the page as a `data:` URL; a larger one
    # as the URL of `GET /artifacts/{chatId}/{filename}`.
    artifact_inline_max_bytes: int = Field(default=256 * 1024, ge=0)
    # The path clients reach this app under, when it is not `/`: behind a proxy that strips a
    # prefix, or `/apps/<name>` in a folder of agents (set by it). Links the server makes (an
    # artifact's download) start with it.
    root_path: Annotated[str, Field(pattern=r"^(/[A-Za-z0-9._~-]+)*$")] = ""
    # -- Several processes or instances as one server (docs/deployment.md, docs/adr/0021).
    # `redis://host:6379/0` moves chat leases, waiting tool calls, stop signals and the chunk
    # logs of active responses to Redis (the `redis` extra). Unset: all in this process.
    redis_url: str | None = None
    # `ADK_STREAM_REDIS_URL` names one node of a Redis Cluster (docs/adr/0031): the cluster
    # client finds the others; every key of a chat is in one hash slot.
    redis_cluster: bool = False
    # Prefix of every Redis key and channel, so several servers can share one Redis.
    redis_key_prefix: Annotated[str, Field(pattern=r"^[A-Za-z0-9_.:-]{1,64}$")] = "adk-stream"
    # A chat's lease lapses this long after its holder stops renewing it (a crashed process);
    # the holder renews it every third of this.
    lease_ttl_seconds: float = Field(default=10.0, gt=0)
    # A dropped connection leaves the response running, to be resumed with
    # `GET /stream/{chatId}/stream`; stop it with `DELETE` on the same path.
    resumable_streams: bool = False
    # How long an ended response's chunk log stays in Redis for followers still reading it.
    chunk_log_ttl_seconds: float = Field(default=60.0, gt=0)
    # `module:attribute` naming an ADK agent, graph workflow or App to serve instead of the
    # demo agent.
    agent: str | None = None
    # A folder of agents in ADK's layout (one per subfolder, as `adk web` reads it), each
    # served under `/apps/<name>/`; or one agent's folder, served at `/`. The command
    # `adk-stream-protocol serve DIR` sets it (docs/adr/0028-package-and-command.md).
    agents_dir: Path | None = None
    app_name: Annotated[str, Field(pattern=r"^[a-zA-Z][a-zA-Z0-9_-]*$")] = "adk_stream_protocol"
    # `auto`: Gemini when a Google API key or Vertex AI is configured, else the offline model.
    model: str = "auto"
    gemini_model: str = "gemini-2.5-flash"
    live_model: str = "gemini-live-2.5-flash-preview"
    # Stream text and earlier results in responses that pause for another approval, instead
    # of holding them back for the final response (docs/adr/0010).
    stream_intermediate_results: bool = False
    # Milliseconds a text or reasoning delta may wait for the next ones of its block, to go
    # out as one chunk: fewer renders for the page (docs/adr/0048). A block's first delta, any
    # other chunk and the end are never held. 0 sends each delta as the model gives it; 100,
    # the smallest window that cut a page's render work 3x in benchmark 12.
    delta_coalescing_ms: int = Field(default=100, ge=0, le=1000)
    # CPython's collector while the app runs (docs/adr/0051): what start-up built frozen out of
    # its walks, and the youngest generation collected every this many net allocations
    # (0 keeps Python's 700). Both are undone at shutdown.
    gc_freeze: bool = True
    gc_young_threshold: int = Field(default=10_000, ge=0, le=1_000_000)
    # How a page runs a browser tool it approved (docs/adr/0011): `on-tool-call`, the answer
    # to the approval hands the call back (`tool-input-available`) and the page runs it from
    # `onToolCall`; `add-output`, the answer does not, and the page runs it as the user
    # approves and adds its output, which the answer would otherwise reset.
    browser_approval_flow: Literal["on-tool-call", "add-output"] = "on-tool-call"
    # /live: the live model's output, TEXT or AUDIO (with transcriptions of both sides).
    live_modality: Literal["TEXT", "AUDIO"] = "TEXT"
    # /live: how long a tool waits for the user's approval before it fails.
    approval_timeout_seconds: float = 300.0
    # /live: the largest accepted WebSocket frame, in bytes.
    max_frame_bytes: int = 8 * 1024 * 1024
    # Show exception details in `error` chunks (development only).
    error_detail: bool = False
    # Browser origins other than the server's own that may call it: CORS on HTTP, and the
    # `Origin` check of the /live handshake. `*` allows any.
    cors_origins: Annotated[list[str], NoDecode] = Field(default_factory=list)
    # The built playground page, served at `/` when it exists: the copy an installed package
    # carries, else a checkout's playground/dist (scripts/serve builds it).
    playground_dir: Path | None = Field(default_factory=lambda: default_playground_dir())
    host: str = "127.0.0.1"
    port: int = 8000
    # Seconds between keep-alive comments while the agent is silent.
    keep_alive_seconds: float = 15.0
    # -- Limits on what one request may ask (docs/adr/0019). Each is refused with 413 or 422
    # and a readable reason; within them, no request blocks the event loop.
    # Largest accepted request body, in bytes (images arrive base64-encoded in it).
    max_request_bytes: int = Field(default=20 * 1024 * 1024, gt=0)
    # Characters of text in one user message (what goes to the model).
    max_message_chars: int = Field(default=200_000, gt=0)
    # Parts in one message.
    max_parts_per_message: int = Field(default=1_000, gt=0)
    # Bytes of JSON a request adds to the chat's record: its messages the record does not hold
    # as sent (new, or changed: an answered approval, an edit). A whole chat the server already
    # holds adds little, however long (docs/adr/0069); a turn's user message with a largest
    # file (base64) fits.
    max_added_bytes: int = Field(default=16 * 1024 * 1024, gt=0)
    # Nesting of JSON in a body or frame. The JSON parser itself stops at 200 levels.
    max_json_depth: int = Field(default=64, gt=0, le=200)
    # Bytes of one file part, decoded.
    max_file_bytes: int = Field(default=10 * 1024 * 1024, gt=0)
    # Seconds a request body may take to arrive in full; slower senders get 408.
    request_body_timeout_seconds: float = Field(default=30.0, gt=0)
    # Responses one process streams at once, on both transports; more get
    # 503 with Retry-After at once instead of queueing. 0 turns the cap off.
    max_concurrent_responses: int = Field(default=100, ge=0)
    # -- Who may call (docs/adr/0019).
    # Host names the server answers to (Host header), against DNS rebinding. `*` allows any;
    # `*.example.com` a domain. The default allows only this machine.
    trusted_hosts: Annotated[list[str], NoDecode] = Field(
        default_factory=lambda: ["localhost", "127.0.0.1", "[::1]", "*.localhost"]
    )
    # The credential a backend presents (`Authorization: Bearer …`) to deliver the final
    # result of a long-running call: `POST /chats/{chatId}/calls/{callId}/result`, off while
    # unset (docs/adr/0040). A service's secret, not a user's: keep it out of the page.
    call_result_token: SecretStr | None = None
    # -- Tool sign-in (docs/adr/0065). The public URL of this server's `GET /auth/callback`
    # (`https://chat.example.com/auth/callback`), registered at each OAuth2 provider the tools
    # sign in to. Set, a sign-in's authorization URL sends the user back there, not to the
    # agent's redirect URI, and the server gives ADK the answer: the page only opens the URL
    # and resumes. Unset, the route is off and the page takes the redirect (ADK's way).
    auth_callback_url: Annotated[str, Field(pattern=r"^https?://[^?#\s]+$")] | None = None
    # How long a sign-in through the callback may take, from its request to the redirect.
    auth_state_ttl_seconds: float = Field(default=600.0, gt=0)
    # Serve Prometheus metrics at /metrics (the `metrics` extra; docs/adr/0027).
    metrics: bool = False
    # Serve /docs, /redoc and /openapi.json.
    api_docs: bool = False
    # How long a request waits for an earlier request on the same chat to finish.
    chat_busy_timeout_seconds: float = 5.0
    # A tool's result the session store could not take (it was down) is kept in the process
    # and written when the store is back, for at most this long; meanwhile the chat's lease
    # stays held and its requests get 503. After it the call is outcome unknown (ADR 0035).
    result_retry_seconds: float = Field(default=300.0, ge=0)
    # Tools (comma-separated names) whose backend makes one effect per call id
    # (`tool_context.function_call_id`): a call whose outcome is unknown (a crash, a lost
    # lease, an outage before its result was stored) is run again under that id by whichever
    # instance finishes the turn, instead of ending as "outcome unknown" (docs/adr/0074). The
    # code's way to say the same: `adk_stream_protocol.idempotent`.
    idempotent_tools: Annotated[list[str], NoDecode] = Field(default_factory=list)
    # The chats' histories this process keeps, in MB (least recently used out first), so a
    # turn reads only the events a chat gained since it was last seen (docs/adr/0070).
    # 0: every read loads the whole history from the store.
    session_cache_mb: float = Field(default=64.0, ge=0)
    # On SIGTERM (a rolling restart): how long open responses may still run to their end
    # before the server ends them with an `error` and exits (docs/adr/0033). Meanwhile
    # `/health` answers 503 and new requests get 503 with Retry-After.
    shutdown_grace_seconds: float = Field(default=30.0, ge=0)
    # Write each response, its request and its chunks to a JSONL file in this directory, for
    # `adk-stream-protocol replay DIR` (docs/adr/0026). The files hold what users typed.
    record_dir: Path | None = None
    # -- Shared state (docs/adr/0044). The session state keys that start with this prefix reach
    # the page as one `data-state` part, and a request's `state` field may change them (the
    # page's input: an agent trusts them no more than a message). Empty: nothing is shared.
    shared_state_prefix: Annotated[str, Field(pattern=r"^\S{0,64}$")] = DEFAULT_STATE_PREFIX
    # Keys in one request's `state` field, and its size as JSON, in bytes (413 past either).
    max_state_keys: int = Field(default=64, gt=0)
    max_state_bytes: int = Field(default=64 * 1024, gt=0)

    @field_validator(
        "redis_url", "record_dir", "call_result_token", "auth_callback_url", mode="before"
    )
    @classmethod
    def _empty_is_unset(cls, value: object) -> object:
        return None if value == "" else value  # `ADK_STREAM_REDIS_URL=` turns Redis off

    @field_validator("shared_state_prefix")
    @classmethod
    def _page_writable(cls, value: str) -> str:
        # `app:` keys are every user's, `temp:` keys are never stored: no page may write them.
        if value.startswith(("app:", "temp:")):
            raise ValueError("an `app:` or `temp:` prefix cannot be shared with the page")
        return value

    @field_validator("cors_origins", "trusted_hosts", "idempotent_tools", mode="before")
    @classmethod
    def _split_list(cls, value: object) -> object:
        if isinstance(value, str):  # comma-separated in the environment
            return [item.strip() for item in value.split(",") if item.strip()]
        return value

    def resolved_model(self) -> str:
        if self.model != "auto":
            return self.model
        return self.gemini_model if google_credentials_configured() else OFFLINE_MODEL_NAME

    def resolved_live_model(self) -> str:
        """The demo agent's model on /live: the offline model has a live connection; Gemini
        needs a live model."""
        model = self.resolved_model()
        return model if is_offline_model(model) else self.live_model


# Settings an earlier version read, and what took their place: one set is ignored, with a
# WARNING at start (docs/adr/0069).
REMOVED_SETTINGS = {
    "ADK_STREAM_MAX_MESSAGES_PER_REQUEST": (
        "a chat is bounded by bytes now: ADK_STREAM_MAX_REQUEST_BYTES for a request, "
        "ADK_STREAM_MAX_ADDED_BYTES for what it adds to the chat's record"
    ),
}


def removed_settings(environ: Mapping[str, str]) -> list[str]:
    """A sentence for each removed setting that ``environ`` still sets."""
    return [
        f"{name} is no longer read and is ignored: {instead}"
        for name, instead in REMOVED_SETTINGS.items()
        if name in environ
    ]


def default_playground_dir() -> Path:
    """The page a built package carries (setup.py copies it in), else a checkout's build."""
    package = Path(__file__).resolve().parent.parent
    packaged = package / "playground"
    return (
        packaged if (packaged / "index.html").is_file() else package.parent / "playground" / "dist"
    )


def google_credentials_configured() -> bool:
    use_vertex = os.environ.get("GOOGLE_GENAI_USE_VERTEXAI", "").lower() in ("1", "true", "yes")
    return use_vertex or bool(os.environ.get("GOOGLE_API_KEY") or os.environ.get("GEMINI_API_KEY"))
