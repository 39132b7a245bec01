"""One typed Settings object; every setting is an environment variable with prefix KASIR_."""

from __future__ import annotations

import os
import secrets
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from kasir.kit.addresses import IPNetwork, parse_allowed_networks


class VaBankNumbers(BaseModel):
    """One bank's VA numbers (KASIR_VA_BANKS): the prefix per payment system and how many digits follow it."""

    model_config = ConfigDict(extra="forbid")

    closed: Annotated[str, Field(pattern=r"^[0-9]{1,10}$")]
    partial: Annotated[str, Field(pattern=r"^[0-9]{1,10}$")] | None = None  # the closed prefix when absent
    open: Annotated[str, Field(pattern=r"^[0-9]{1,10}$")] | None = None  # the closed prefix when absent
    free_digits: Annotated[int, Field(ge=1, le=16)]


class Settings(BaseSettings):
    # Precedence: the environment, then `.env` in the working directory, then the defaults below.
    model_config = SettingsConfigDict(env_prefix="KASIR_", extra="ignore", env_file=".env", env_file_encoding="utf-8")

    env: Literal["staging", "production"] = Field(
        "staging", description="`staging` enables the dummy payment and simulator pages; `production` hides them."
    )
    data_dir: Path = Field(Path("var"), description="Where the embedded database and generated keys live.")
    database_url: str = Field(
        "",
        description="SQLAlchemy URL. Default: SQLite file `<data_dir>/kasir.db`. "
        "PostgreSQL: `postgresql+asyncpg://user:pass@host/db`.",
    )
    public_url: str = Field(
        "http://127.0.0.1:8000", description="Base URL used in links the service hands out (qrUrl, link, pages)."
    )
    secret_key: SecretStr | None = Field(
        None,
        description="Encrypts merchant secrets at rest and signs access tokens. "
        "Default: generated once into `<data_dir>/secret.key`.",
    )
    secret_key_previous: Annotated[list[SecretStr], NoDecode] = Field(
        default_factory=list,
        description="Earlier values of KASIR_SECRET_KEY, comma-separated: what they sealed still opens and what "
        "they signed still verifies, until `kasir secrets rotate` has re-sealed every secret with the current key.",
    )
    admin_token: SecretStr | None = Field(
        None,
        description="Bearer token of the `/admin` API. Default: generated once into `<data_dir>/admin.token`.",
    )
    clock_skew_seconds: int = Field(300, ge=0, description="Allowed difference between X-TIMESTAMP and server time.")
    max_database_clock_skew_seconds: float = Field(
        60.0,
        gt=0,
        description="While this machine's clock differs from the database's by more than this, a worker runs no "
        "expiry, purge or callback claim and the server answers 503 but to its health checks (both say so in the "
        "log), until they agree again.",
    )
    va_banks: dict[str, VaBankNumbers] = Field(
        default_factory=dict,
        description="Virtual-account numbers per bank, over the shipped table (docs/decisions.md §9.4), as JSON: "
        '{"BCA": {"closed": "40416", "partial": "40415", "open": "40414", "free_digits": 9}}. Only the banks named '
        "change; the staging issuer numbers by it and a merchant's chosen digits are held to its free digits.",
    )
    callback_schedule: Annotated[list[int], NoDecode] = Field(
        default_factory=lambda: [10, 60, 300],
        description="Seconds to wait before each callback retry, comma-separated (jitter is added).",
    )
    callback_timeout_seconds: float = Field(10.0, gt=0, description="Timeout of one callback attempt.")
    callback_answer_max_bytes: int = Field(
        16384, ge=2048, description="Bytes of a merchant's answer to a callback read at most; the rest is not read."
    )
    callback_lease_seconds: float = Field(
        30.0, gt=0, description="How long a worker owns a claimed callback; must exceed the timeout."
    )
    callback_poll_seconds: float = Field(
        1.0, gt=0, description="How often an idle worker looks for due callbacks (commits wake it at once)."
    )
    callback_concurrency: int = Field(32, ge=1, description="Callback attempts in flight per worker.")
    callback_concurrency_per_merchant: int = Field(
        8, ge=1, description="Callback attempts in flight per worker for one merchant, at most."
    )
    callback_signature_brand: str = Field(
        "svc",
        pattern=r"^[A-Za-z0-9]{1,32}$",
        description="Brand word of the callback signature header `<brand>-signature` (and the wallet callback's "
        "query parameter): set it to the provider's own word so a merchant's code reads its real header name.",
    )
    callback_allowed_networks: Annotated[list[IPNetwork], NoDecode] = Field(
        default_factory=list,
        description="Production: private networks (comma-separated CIDR, inside 10/8, 172.16/12, 192.168/16, "
        "100.64/10, 127/8, fc00::/7 or ::1) where callbacks may also go, http or https; every other address must "
        "be public and https. For merchants on the operator's own network; empty by default.",
    )
    embedded_worker: bool = Field(True, description="Run the callback worker inside `kasir serve`.")
    credential_cache_seconds: float = Field(
        5.0,
        ge=0,
        description="How long a process reuses a merchant's public key for token signatures, its proven "
        "Basic-auth credentials and its sealed client secret (BNPL symmetric signatures); a rotated key takes effect "
        "in other processes within this time. 0 disables the cache.",
    )
    sqlite_group_commit_max: int = Field(
        64,
        ge=1,
        description="SQLite: the writers of a process share one transaction, committed (fsync) once per batch "
        "of at most this many units of work; each request still answers only after its data is durable.",
    )
    debug_write_seat_seconds: float = Field(
        0.0,
        ge=0,
        description="Debugging (the tests set it): on SQLite, a unit of work that holds the process's write seat "
        "longer than this fails, because it waited on something slow inside a write; 0 turns the watchdog off.",
    )
    max_body_bytes: int = Field(
        1024 * 1024,
        ge=1024,
        description="The largest request body accepted (413 past it, in the route's format), before any parsing.",
    )
    max_header_bytes: int = Field(
        64 * 1024, ge=1024, description="The largest request line and headers accepted (431 past it)."
    )
    header_timeout_seconds: float = Field(
        10.0, gt=0, description="A request's line and headers must arrive within this (408 and closed otherwise)."
    )
    body_timeout_seconds: float = Field(
        30.0, gt=0, description="A request's body must arrive within this after its headers (408 otherwise)."
    )
    max_connections: int = Field(
        1000,
        ge=1,
        description="Connections a server process holds at once; past them a new connection is answered 503 and "
        "closed. Lowered at start-up to what the open-file limit (ulimit -n) leaves.",
    )
    max_connections_per_address: int = Field(
        100,
        ge=1,
        description="Connections one client address holds at once in a server process (its reverse proxies in "
        "KASIR_TRUSTED_PROXIES excepted); past them its new connection is answered 503 and closed.",
    )
    write_timeout_seconds: float = Field(
        30.0, gt=0, description="An answer the client stops reading is given up and its connection closed after this."
    )
    public_docs: bool | None = Field(
        None,
        description="Serve /docs, /redoc and /openapi.json. Default: in staging, not in production, where the "
        "contract is the repository's documentation and the port faces the internet.",
    )
    public_metrics: bool | None = Field(
        None,
        description="Serve /metrics (volumes and callback states). Default: in staging, not in production, "
        "unless turned on for a scraper that reaches the port privately.",
    )
    admin_api: bool = Field(True, description="Serve the /admin API (Bearer KASIR_ADMIN_TOKEN); false removes it.")
    idempotency_wait_seconds: float = Field(
        0.5,
        gt=0,
        le=10,
        description="PostgreSQL: how long a request waits for another request holding the same X-Idempotency-Key "
        "before it answers 409 REQUEST_IN_PROGRESS.",
    )
    db_pool_size: int = Field(
        10, ge=1, description="Connections per process, at most (PostgreSQL); a unit of work past them waits for one."
    )
    log_level: str = Field("INFO", description="Python log level name.")
    log_format: Literal["json", "text"] = Field("json", description="Log lines as JSON (default) or plain text.")
    bench_mode: bool = Field(False, description="Enables `/bench/ceiling`, the benchmark's same-run ceiling.")
    console: bool = Field(True, description="Serve the operators' and merchants' web console under /console.")
    console_session_hours: float = Field(
        8.0, gt=0, description="Console sign-in lifetime: a session ends this long after sign-in, whatever its use."
    )
    console_idle_minutes: float = Field(
        60.0, gt=0, description="Console session idle limit: a session unused this long ends."
    )
    console_lock_after: int = Field(
        5, ge=1, description="Console: this many failed sign-ins in a row lock the account for console_lock_minutes."
    )
    console_lock_minutes: float = Field(15.0, gt=0, description="Console: how long a locked account stays locked.")
    console_sign_in_delay_seconds: float = Field(
        0.5,
        ge=0,
        description="Console: a failed sign-in answers after this many seconds per failure in a row (4x at most).",
    )
    rate_limit_token_requests_per_ip: int = Field(
        300,
        ge=0,
        description="Requests to the access-token paths from one source address per token window (429 past it); "
        "0 turns the limit off.",
    )
    rate_limit_tokens_per_client: int = Field(
        60,
        ge=0,
        description="Access tokens issued to one client (X-CLIENT-KEY) per token window; only requests that prove "
        "the client's key count. 0 turns the limit off.",
    )
    rate_limit_token_window_seconds: int = Field(
        60, ge=1, le=86_400, description="The window of the two access-token limits."
    )
    rate_limit_failures_per_ip: int = Field(
        50,
        ge=0,
        description="Failed authentications (Basic, access token, SNAP and x-req-signature signatures, admin "
        "token, console sign-in) from one source address per failure window; past it that address is refused "
        "(429) until the window ends. 0 turns the limit off.",
    )
    rate_limit_failures_per_merchant: int = Field(
        10,
        ge=0,
        description="Failed authentications as one merchant from one source address per failure window; past it "
        "that merchant's requests from that address are refused (429) until the window ends. 0 turns it off.",
    )
    rate_limit_failure_window_seconds: int = Field(
        300, ge=1, le=86_400, description="The window of the failed-authentication limits (the longest lockout)."
    )
    trusted_proxies: str = Field(
        "",
        description="Addresses of reverse proxies whose X-Forwarded-For and X-Forwarded-Proto are believed "
        "(comma-separated, `*` for any); the rate limits count the address they name. Default: none, the TCP "
        "peer is the source address.",
    )
    processors: str = Field(
        "",
        description="Who moves the money, per product: `card=NAME,wallet=NAME,bnpl=NAME`, and per channel where "
        "one goes elsewhere: `wallet.OVO=NAME` (processors installed under the entry-point group "
        "`kasir.processors`). Default: the simulator for every product in staging, none in production; a product "
        "or channel without a processor is switched off. Production refuses the simulator.",
    )
    simulator_payout_delay_seconds: float = Field(
        10,
        ge=0,
        le=86_400,
        description="The staging payout rail (the simulator): how long a transfer to an account ending 0002 or 0003 "
        "stays `03` before the worker moves it to `00` or `06` (docs/decisions.md §11.9).",
    )
    card_channels: str = Field(
        "",
        description="Card channels and their acquirers, e.g. `CARD,BCACC:BCA`; replaces the shipped list when set.",
    )
    bnpl_categories: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="BNPL item categories (4-character codes, comma-separated, e.g. `ELEC,FASH,FEES`) that replace "
        "the shipped table. Default: the shipped table.",
    )
    worker_metrics_port: int = Field(
        0,
        ge=0,
        le=65535,
        description="`kasir worker` serves its Prometheus metrics (callback deliveries) on this port at /metrics; "
        "0 (the default) serves none. `kasir worker --metrics-port` overrides it.",
    )
    worker_metrics_host: str = Field(
        "127.0.0.1", description="The address `kasir worker` serves its metrics on (with KASIR_WORKER_METRICS_PORT)."
    )

    @field_validator("bnpl_categories", mode="before")
    @classmethod
    def _parse_categories(cls, value: object) -> object:
        codes = [part.strip() for part in value.split(",")] if isinstance(value, str) else value
        if isinstance(codes, list):
            codes = [code for code in codes if code]
            wrong = [code for code in codes if not (isinstance(code, str) and len(code) == 4)]
            if wrong:
                raise ValueError(f"{wrong[0]!r} is not a 4-character category code (e.g. ELEC,FASH,FEES)")
        return codes

    @field_validator("callback_schedule", mode="before")
    @classmethod
    def _parse_schedule(cls, value: object) -> object:
        if isinstance(value, str):
            text = value.strip().strip("[]")
            return [int(part) for part in text.split(",") if part.strip()]
        return value

    @field_validator("va_banks")
    @classmethod
    def _known_banks(cls, value: dict[str, VaBankNumbers]) -> dict[str, VaBankNumbers]:
        from kasir.va.banks import BANKS  # the shipped table: its banks are the channels the VA API takes

        unknown = sorted(set(value) - set(BANKS))
        if unknown:
            raise ValueError(f"{', '.join(unknown)}: not a bank of the VA API (one of {', '.join(BANKS)})")
        return value

    @field_validator("callback_allowed_networks", mode="before")
    @classmethod
    def _parse_networks(cls, value: object) -> object:
        if isinstance(value, str):
            return parse_allowed_networks(value)
        if isinstance(value, list | tuple):
            return parse_allowed_networks(",".join(str(network) for network in value))
        return value

    @field_validator("secret_key_previous", mode="before")
    @classmethod
    def _parse_previous_keys(cls, value: object) -> object:
        if isinstance(value, str):
            return [part.strip() for part in value.split(",") if part.strip()]
        return value

    @field_validator("public_url")
    @classmethod
    def _strip_slash(cls, value: str) -> str:
        return value.rstrip("/")

    @property
    def console_cookie_secure(self) -> bool:
        """The console's cookies carry `Secure` when the public URL is https."""
        return self.public_url.startswith("https://")

    @property
    def is_production(self) -> bool:
        return self.env == "production"

    @property
    def resolved_database_url(self) -> str:
        if self.database_url:
            return self.database_url
        return f"sqlite+aiosqlite:///{(self.data_dir / 'kasir.db').as_posix()}"

    @property
    def serves_docs(self) -> bool:
        return self.public_docs if self.public_docs is not None else not self.is_production

    @property
    def serves_metrics(self) -> bool:
        return self.public_metrics if self.public_metrics is not None else not self.is_production

    def hidden_path_prefixes(self) -> tuple[str, ...]:
        """The paths a deployment does not serve (KASIR_PUBLIC_METRICS, KASIR_ADMIN_API)."""
        return (*(() if self.serves_metrics else ("/metrics",)), *(() if self.admin_api else ("/admin",)))

    def loggable(self) -> dict[str, object]:
        """The settings as a log line may show them: secrets masked, the database password hidden."""
        shown = self.model_dump(mode="json")  # a SecretStr dumps as '**********'
        scheme, separator, rest = self.database_url.partition("://")
        if separator and "@" in rest:
            credentials, _, host = rest.rpartition("@")
            user = credentials.split(":", 1)[0]
            shown["database_url"] = f"{scheme}://{user}:…@{host}" if ":" in credentials else self.database_url
        return shown

    def resolved_secret_key(self) -> str:
        if self.secret_key is not None:
            return self.secret_key.get_secret_value()
        return _read_or_create_secret(self.data_dir, "secret.key")

    def previous_secret_keys(self) -> tuple[str, ...]:
        """KASIR_SECRET_KEY_PREVIOUS: keys that still open and verify, never seal or sign."""
        if not self.secret_key_previous:
            return ()
        current = self.resolved_secret_key()
        return tuple(
            key for key in dict.fromkeys(k.get_secret_value() for k in self.secret_key_previous) if key != current
        )

    def resolved_admin_token(self) -> str:
        if self.admin_token is not None:
            return self.admin_token.get_secret_value()
        return _read_or_create_secret(self.data_dir, "admin.token")


_generated_secrets: dict[tuple[str, str], str] = {}


def _read_or_create_secret(directory: Path, name: str) -> str:
    """A generated secret, read once per process (it is on hot paths), created (mode 0600) on first use."""
    key = (str(directory), name)  # str(Path) is cached by pathlib; joining and hashing a Path is not
    secret = _generated_secrets.get(key)
    if secret is None:
        secret = _generated_secrets[key] = _load_or_create(directory / name)
    return secret


def _load_or_create(path: Path) -> str:
    if path.exists():
        return path.read_text().strip()
    path.parent.mkdir(parents=True, exist_ok=True)
    value = secrets.token_urlsafe(32)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return path.read_text().strip()
    with os.fdopen(fd, "w") as handle:
        handle.write(value + "\n")
    return value


_current: Settings | None = None


def get_settings() -> Settings:
    """The process's settings: read from the environment on first use."""
    global _current
    if _current is None:
        _current = Settings()
    return _current


def configure(settings: Settings | None) -> None:
    """Install `settings` as the process's settings (the CLI's options, tests); None re-reads the env."""
    global _current
    _current = settings
