"""The ``actorsched serve`` command: flags, wiring, signals and exit codes.

The service itself (consume, answer, ack, terms, fail-stop) is
:mod:`.service`; this module only turns flags into a Scheduler, a journal
and a :class:`~.service.SchedulerService`, runs them until SIGTERM or
SIGINT, and says how it ended: 0 after a clean stop, 1 after a fail-stop
or a failure to start.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
from pathlib import Path
from typing import Protocol

import aiormq.exceptions
from yarl import URL

from . import settings
from .amqp.metrics import MetricsServer, ServiceMetrics
from .amqp.protocol import dead_letter_names
from .amqp.service import QueueOfAnotherState, SchedulerService, redact
from .auth import Authorizer
from .errors import SchedulerError
from .journal import JournalMissing, open_journal
from .logs import configure_logging
from .metrics import SchedulerMetrics
from .models import SchedulerConfig
from .nova.endpoint import NovaEndpoint
from .nova.placement import PlacementClient
from .nova.placing import PlacementLink, load_host_facts, placement_auth
from .scheduler import Scheduler
from .settings import ServiceSettings, Settings, default_journal_path

__all__ = ["add_arguments", "main", "serve"]

log = logging.getLogger("actorsched.amqp.service")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of ``actorsched serve``: ``--config`` and the common settings."""
    settings.add_arguments(parser)


def _build_scheduler(config: SchedulerConfig, service: ServiceSettings) -> Scheduler:
    # acks follow answers, and with a journal the owner answers only once a batch is durable
    journal = None
    if not service.no_journal:
        path = service.journal
        # a journal is made only when asked, or at the default path on its first use
        create = service.create_journal or Path(path) == default_journal_path()
        if "://" not in path and create:  # a missing directory is made private to this user
            Path(path).parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        journal = open_journal(
            path,
            shard=service.shard,
            commit_timeout=service.commit_timeout,
            create=create,
            owner_check_interval=service.owner_check_interval,
        )
    return Scheduler(
        config,
        journal=journal,
        follow_interval=service.follow_interval,
        metrics=SchedulerMetrics(),
    )


def _authorizer(settings: Settings) -> Authorizer:
    """The ``[auth]`` table's roles; without users, serve's own broker user has them all."""
    auth = settings.auth
    if not auth.users:
        own = URL(settings.service.amqp_url).user or "guest"
        log.info(
            "authorization: no [auth] users, so only serve's own broker user %r may do "
            "anything; every other caller (anonymous too) is refused",
            own,
        )
        return Authorizer.own(own)
    return Authorizer(auth.users, auth.max_priority)


# seconds between a standby's probes of its own queue: a lone serve (or the first of a
# pair) learns it owns the queue without waiting for traffic, a standby keeps asking
_PROBE_INTERVAL = 2.0


def _nova_endpoint(
    settings: Settings, scheduler: Scheduler, service: SchedulerService, metrics: ServiceMetrics
) -> NovaEndpoint | None:
    """The Nova endpoint of a ``--nova-config`` serve, following the service's terms."""
    conf = settings.nova_conf
    if conf is None:
        return None
    for line in conf.warnings:
        log.warning("nova.conf: %s", line)
    link = None
    if settings.nova.placement_url is not None:
        client = PlacementClient(
            settings.nova.placement_url,
            timeout=settings.nova.placement_timeout,
            max_connections=settings.nova.placement_max_connections,
            # Keystone when nova.conf's [placement] says auth_type = password
            auth=placement_auth(
                conf.placement_auth,
                settings.nova.placement_token,
                timeout=settings.nova.placement_timeout,
            ),
        )
        facts_file = settings.nova.placement_host_facts
        link = PlacementLink(
            scheduler,
            client,
            poll_interval=settings.nova.placement_poll_interval,
            max_attempts=scheduler.config.max_attempts,
            host_facts=None if facts_file is None else load_host_facts(Path(facts_file)),
        )
        log.info(
            "following Placement at %s (every %gs; claims written to it before Nova is answered)",
            settings.nova.placement_url,
            settings.nova.placement_poll_interval,
        )
    nova = NovaEndpoint(
        scheduler,
        conf,
        cell_uuid=settings.nova.cell_uuid,
        max_body_bytes=settings.service.max_body_bytes,
        prefetch=min(settings.nova.nova_prefetch, scheduler.config.mailbox_size),
        topic=settings.nova.topic,
        metrics=metrics,
        roles=frozenset(settings.auth.nova),
        placement=link,
    )
    pending: set[asyncio.Task[None]] = set()

    def follow(active: bool) -> None:
        task = asyncio.get_running_loop().create_task(
            nova.begin_term() if active else nova.end_term()
        )
        pending.add(task)
        task.add_done_callback(pending.discard)

    service.term_listeners.append(follow)
    return nova


class _Startable(Protocol):
    url: str

    async def start(self) -> None: ...


async def _start(service: _Startable, within: float, stop: asyncio.Event) -> bool:
    """``service.start()``, tried again while the broker is unreachable, for ``within``
    seconds at most (1 s, then doubling to 5 s between attempts; each attempt at most
    10 s), a line per attempt. False when ``stop`` was set first (SIGTERM meanwhile)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    pause = 1.0
    attempt = 1
    while not stop.is_set():
        try:
            await asyncio.wait_for(service.start(), timeout=max(1.0, min(10.0, within)))
            return True
        except (aiormq.exceptions.AMQPConnectionError, OSError, TimeoutError) as exc:
            reason = str(exc) or type(exc).__name__
            left = deadline - loop.time()
            if left <= 0:
                raise ConnectionError(
                    f"broker {redact(service.url)} unreachable after {attempt} attempt(s) "
                    f"in {within:g} s (--connect-timeout): {reason}"
                ) from exc
            wait = min(pause, left)
            log.warning(
                "broker %s unreachable (attempt %d: %s); trying again in %.1f s, for %.0f s more",
                redact(service.url),
                attempt,
                reason,
                wait,
                left,
            )
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=wait)
            pause = min(pause * 2, 5.0)
            attempt += 1
    return False


async def serve(settings: Settings, stop: asyncio.Event | None = None) -> int:
    """Run the service until SIGTERM or SIGINT (or until ``stop`` is set).

    It starts as a standby (following the journal) and becomes the owner on
    its first delivery. Returns 0 after a clean stop, 1 after a fail-stop
    (a journal error, or another owner took the shard over).
    """
    options = settings.service
    stop = stop if stop is not None else asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    scheduler = _build_scheduler(settings.scheduler, options)
    code = 0
    try:
        await scheduler.follow()
        metrics = ServiceMetrics(scheduler)
        endpoint: MetricsServer | None = None
        service = SchedulerService(
            scheduler,
            options.amqp_url,
            queue=options.queue,
            prefetch=options.prefetch,
            max_body_bytes=options.max_body_bytes,
            max_reply_bytes=options.max_reply_bytes,
            delivery_limit=options.delivery_limit,
            metrics=metrics,
            drain_timeout=options.drain_timeout,
            probe_interval=_PROBE_INTERVAL,
            authorizer=_authorizer(settings),
        )
        nova = _nova_endpoint(settings, scheduler, service, metrics)
        try:
            if options.metrics_port is not None:
                endpoint = MetricsServer(
                    metrics,
                    host=options.metrics_host,
                    port=options.metrics_port,
                    connected=lambda: service.connected,
                )
                await endpoint.start()
            if nova is not None and not await _start(nova, options.connect_timeout, stop):
                log.info("stopped before Nova's broker could be reached")
                return 0
            if not await _start(service, options.connect_timeout, stop):
                log.info("stopped before the broker could be reached")
                return 0
            journal = scheduler.journal
            log.info(
                "actorsched serve ready as standby: consuming %r on %s (single active "
                "consumer: it owns the state from its first delivery; prefetch %d, dead "
                "letters to %r, journal %s, metrics %s)",
                service.queue,
                redact(service.url),
                service.prefetch,
                dead_letter_names(service.queue)[1],
                "off" if journal is None else journal.name,
                f"on :{endpoint.port}/metrics" if endpoint else "off",
            )
            stopped = asyncio.ensure_future(stop.wait())
            failed = asyncio.ensure_future(service.failed.wait())
            await asyncio.wait({stopped, failed}, return_when=asyncio.FIRST_COMPLETED)
            stopped.cancel()
            failed.cancel()
            if service.failure is not None:
                code = 1
            else:
                log.info("stopping: no new deliveries; finishing %d in flight", service.in_flight)
            await service.stop()
            log.info(
                "stopped: %d accepted, %d answered, %d returned to the queue",
                service.accepted,
                service.answered,
                service.returned,
            )
        finally:
            await service.stop()
            if nova is not None:
                await nova.stop(options.drain_timeout)
                if nova.placement is not None:
                    await nova.placement.client.close()
            if endpoint is not None:
                await endpoint.close()
    finally:
        await scheduler.stop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)
    if code:
        log.error("actorsched serve exits with status %d (fail-stop, see above)", code)
    return code


def main(args: argparse.Namespace) -> int:
    """Entry point of ``actorsched serve``: 0 after a clean stop, 1 after a fail-stop or
    a failure to start, 2 for bad settings (before anything starts)."""
    chosen = settings.load(args)  # SettingsError: the CLI prints its line and exits 2
    configure_logging(chosen.service.log_level, chosen.service.log_format)
    chosen.warn_unknown_env(log)
    if not chosen.service.log_decisions:
        logging.getLogger("actorsched.decisions").setLevel(logging.WARNING)
    try:
        return asyncio.run(serve(chosen))
    except (QueueOfAnotherState, JournalMissing) as exc:  # a setting: restarting cannot help
        log.error("actorsched serve refused to start: %s", exc)
        return 2
    except (ValueError, SchedulerError, ConnectionError, OSError) as exc:
        log.error("actorsched serve failed to start: %s", exc)
        return 1
