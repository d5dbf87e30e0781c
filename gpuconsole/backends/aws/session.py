"""AWS sessions and clients: the credential chain as the AWS CLI finds it, one client per
(service, region), and botocore's failures as backend errors.

Credentials, regions and endpoints (``AWS_ENDPOINT_URL*``) come the way the AWS CLI finds them,
so the console works wherever ``aws`` works and tests reach a local peer with no test switch.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import boto3
import botocore.session
from botocore.config import Config
from botocore.credentials import DeferredRefreshableCredentials
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    NoCredentialsError,
    PartialCredentialsError,
    ProfileNotFound,
)

from gpuconsole.backends.aws import mapping as aws_mapping
from gpuconsole.backends.aws.mapping import CREDENTIALS_HINT, REGION_HINT, SSO_ERRORS, SSO_HINT
from gpuconsole.backends.base import BackendError, BackendUnavailable

log = logging.getLogger(__name__)

_models_lock = threading.Lock()
_models: Any = None  # botocore's data loader, shared by every session this module creates


def new_session(profile: str | None) -> boto3.session.Session:
    """A boto3 session whose service models are parsed once per process, not once per session.

    botocore caches the JSON models it parses (EC2's is megabytes) in the session's data loader;
    sharing that loader lets a console that rebuilds its backend (a profile or region switch, a
    reconnect) skip a fifth of a second of parsing per client.
    """
    global _models
    core = botocore.session.get_session()
    with _models_lock:
        if _models is None:
            _models = core.get_component("data_loader")
        else:
            core.register_component("data_loader", _models)
        session = boto3.session.Session(botocore_session=core, profile_name=profile)
        paths = _models.search_paths  # boto3 appends its own data folder once per session
        paths[:] = list(dict.fromkeys(paths))
    # A fresh loader reads the profile and would have failed on a missing one; a shared one does
    # not, so check here (``profile_name`` is AWS_PROFILE's value when no profile was passed).
    if session.profile_name != "default" and session.profile_name not in session.available_profiles:
        raise ProfileNotFound(profile=session.profile_name)
    return session


class _RefreshReported(logging.Filter):
    """Drops botocore's traceback of a failed credential refresh when the refresh is ours: the
    error is re-raised to the caller, which reports it in one line (and audits it)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.exc_info and isinstance(record.exc_info[1], BackendError))


logging.getLogger("botocore.credentials").addFilter(_RefreshReported())


class AwsSession:
    """The boto3 session and clients of one profile and its regions, made on first use.

    The constructor only stores settings: the UI builds this object on its own thread, and
    resolving credentials can mean reading SSO caches or calling STS. The boto3 session and one
    client per (service, region) are created on first use, from a worker thread.
    """

    def __init__(
        self,
        regions: tuple[str, ...] = (),
        profile: str | None = None,
        *,
        all_types: bool = False,
        connect_timeout: float = 5,
        read_timeout: float = 20,
        max_attempts: int = 5,
    ) -> None:
        """Store settings; nothing here touches the network or the credential chain.

        Args:
            regions: regions to watch; empty means the profile's / environment's region.
            profile: a named profile of ``~/.aws/config``; ``None`` uses the default chain.
            all_types: list every instance in polls, not only NVIDIA GPU families.
            connect_timeout: seconds to open a connection to an endpoint.
            read_timeout: seconds to wait for an answer once connected.
            max_attempts: tries per call, the first included, in botocore's "standard" retry
                mode (throttling, 5xx and connection errors are retried with backoff).
        """
        self._explicit_regions = tuple(regions)
        self._profile = profile
        self._all_types = all_types
        self._config = Config(
            # total_max_attempts counts the first try; botocore's max_attempts would not.
            retries={"mode": "standard", "total_max_attempts": max_attempts},
            connect_timeout=connect_timeout,
            read_timeout=read_timeout,
            user_agent_extra="gpuconsole",
        )
        self._max_attempts = max_attempts
        # RunInstances is retried by launch() itself: botocore would retry a capacity error
        # (a 5xx) max_attempts times before the launcher could move on to the next zone.
        self._launch_config = self._config.merge(Config(retries={"mode": "standard", "total_max_attempts": 1}))
        self._lock = threading.RLock()  # boto3 session and client creation are not thread-safe
        self._session: boto3.session.Session | None = None
        self._clients: dict[tuple[str, str, str], Any] = {}
        self._secrets: tuple[str, ...] = ()  # credential values, cut out of any message
        self._credentials_checked = False
        self._refresh: Callable[[], dict[str, str]] | None = None

    # ----------------------------------------------------------------- session and clients

    def use_credentials(self, refresh: Callable[[], dict[str, str]] | None) -> None:
        """Make every later call with the credentials ``refresh`` gives instead of the login's own.

        ``refresh`` has botocore's refresh shape (``access_key``, ``secret_key``, ``token``,
        ``expiry_time``): botocore calls it on first use and again shortly before they expire.
        It is how a role session of ``[aws.roles]`` reaches every client; ``None`` goes back to
        the login's credential chain.
        """
        self.close()
        with self._lock:
            self._refresh = refresh
            self._session = None
            self._credentials_checked = False

    @property
    def profile(self) -> str | None:
        """The named profile in use (``None``: the default chain)."""
        return self._profile

    @property
    def regions(self) -> tuple[str, ...]:
        """The regions watched: the explicit ones, else the session's; ``()`` when unknown."""
        try:
            return self._configured_regions()
        except BackendError:
            return ()

    def _boto_session(self) -> boto3.session.Session:
        with self._lock:
            if self._session is None:
                try:
                    session = new_session(self._profile)
                except ProfileNotFound as exc:
                    raise BackendUnavailable(f"AWS profile {exc.kwargs.get('profile')!r} not found",
                                             hint="`aws configure list-profiles` shows the profiles there are") from exc
                if self._refresh is not None:
                    # boto3 has no public setter for refreshable credentials: this is what its
                    # own assume-role provider leaves on the botocore session.
                    session._session._credentials = DeferredRefreshableCredentials(self._refresh, "assume-role")
                self._session = session
            return self._session

    def _configured_regions(self) -> tuple[str, ...]:
        if self._explicit_regions:
            return self._explicit_regions
        try:
            region = self._boto_session().region_name
        except BotoCoreError as exc:  # a config file that cannot be read
            raise BackendUnavailable(f"AWS configuration unreadable: {aws_mapping.one_line(str(exc))}",
                                     hint=REGION_HINT) from exc
        if not region:
            raise BackendUnavailable("no AWS region configured", hint=REGION_HINT)
        return (region,)

    def _check_credentials(self) -> None:
        """Resolve the credential chain once, so a missing login reads as one clear message."""
        with self._lock:
            if self._credentials_checked:
                return
            session = self._boto_session()
            try:
                credentials = session.get_credentials()
                frozen = credentials.get_frozen_credentials() if credentials is not None else None
            except SSO_ERRORS as exc:
                raise BackendUnavailable("the AWS SSO login has expired or is missing", hint=SSO_HINT) from exc
            except (NoCredentialsError, PartialCredentialsError) as exc:
                raise BackendUnavailable(f"no usable AWS credentials: {aws_mapping.one_line(str(exc))}", hint=CREDENTIALS_HINT) from exc
            except BotoCoreError as exc:
                raise BackendUnavailable(f"AWS credentials could not be loaded: {aws_mapping.one_line(str(exc))}",
                                         hint=CREDENTIALS_HINT) from exc
            if frozen is None or not frozen.access_key:
                raise BackendUnavailable("no AWS credentials found", hint=CREDENTIALS_HINT)
            self._secrets = tuple(v for v in (frozen.access_key, frozen.secret_key, frozen.token) if v)
            self._credentials_checked = True

    def _client(self, service: str, region: str, *, purpose: str = "") -> Any:
        """The one client for ``(service, region)`` (and ``purpose``: "launch" retries nothing
        by itself); created under the lock on first use."""
        self._check_credentials()
        with self._lock:
            client = self._clients.get((service, region, purpose))
            if client is None:
                config = self._launch_config if purpose == "launch" else self._config
                with self._errors(region):
                    client = self._boto_session().client(service, region_name=region, config=config)
                self._clients[(service, region, purpose)] = client
            return client

    def close(self) -> None:
        """Drop the clients (and their connection pools); the next call makes new ones."""
        with self._lock:
            clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            try:
                client.close()
            except Exception:  # noqa: BLE001 - closing a pool must never fail an exit
                log.debug("closing an AWS client failed", exc_info=True)

    # ----------------------------------------------------------------- errors

    def _translate(self, exc: Exception, where: str = "") -> BackendError:
        return aws_mapping.backend_error(exc, where, secrets=self._secrets)

    @contextmanager
    def _errors(self, where: str = "") -> Iterator[None]:
        """Run AWS calls and their mapping; only :class:`BackendError` subclasses come out.

        botocore's exceptions go through :func:`aws_mapping.backend_error`; a ``KeyError`` or
        ``ValueError`` while mapping means an answer of a shape we do not know (a new instance
        state, a field missing), which is the cloud's answer failing, not the console.
        """
        try:
            yield
        except BackendError:
            raise
        except (ClientError, BotoCoreError) as exc:
            raise self._translate(exc, where) from exc
        except (KeyError, ValueError, TypeError) as exc:
            prefix = f"{where}: " if where else ""
            raise BackendError(f"{prefix}unexpected answer from AWS ({type(exc).__name__}: {exc})") from exc

    @staticmethod
    def _items(client: Any, operation: str, key: str, **kwargs: Any) -> list[Any]:
        """Every ``key`` item of every page of ``operation``."""
        return [item for page in client.get_paginator(operation).paginate(**kwargs) for item in page.get(key, ())]
