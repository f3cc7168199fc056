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
import logging
import os
import signal

import aiormq.exceptions
from pydantic import ValidationError

from ..errors import SchedulerError
from ..journal import DEFAULT_SHARD, open_journal
from ..models import SchedulerConfig
from ..scheduler import DEFAULT_FOLLOW_INTERVAL, Scheduler
from .metrics import MetricsServer, ServiceMetrics
from .protocol import (
    DEFAULT_DELIVERY_LIMIT,
    DEFAULT_MAX_BODY_BYTES,
    DEFAULT_MAX_REPLY_BYTES,
    DEFAULT_PREFETCH,
    DEFAULT_QUEUE,
    DEFAULT_URL,
    dead_letter_names,
)
from .service import SchedulerService, redact

__all__ = ["add_arguments", "main", "serve"]

log = logging.getLogger("actorsched.amqp.service")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of ``actorsched serve``."""
    parser.add_argument(
        "--amqp-url",
        default=os.environ.get("ACTORSCHED_AMQP_URL", DEFAULT_URL),
        help="broker URL (default: $ACTORSCHED_AMQP_URL or %(default)s)",
    )
    parser.add_argument(
        "--queue", default=DEFAULT_QUEUE, help="request queue to consume (default %(default)s)"
    )
    parser.add_argument(
        "--prefetch",
        type=int,
        default=None,
        help=f"deliveries in flight at most; at most --mailbox-size "
        f"(default: the smaller of {DEFAULT_PREFETCH} and --mailbox-size)",
    )
    parser.add_argument(
        "--mailbox-size",
        type=int,
        default=SchedulerConfig().mailbox_size,
        help="the scheduler owner's bounded mailbox (default %(default)s)",
    )
    parser.add_argument(
        "--max-waiting",
        type=int,
        default=SchedulerConfig().max_waiting,
        help="messages that may wait in line for room while the mailbox is full "
        "(default %(default)s)",
    )
    parser.add_argument(
        "--max-body-bytes",
        type=int,
        default=DEFAULT_MAX_BODY_BYTES,
        help="larger messages are cut to their head as they arrive and dead-lettered "
        "(default %(default)s)",
    )
    parser.add_argument(
        "--max-reply-bytes",
        type=int,
        default=DEFAULT_MAX_REPLY_BYTES,
        help="larger replies are refused with InvalidRequest, before the work where it "
        "can be told (default %(default)s)",
    )
    parser.add_argument(
        "--delivery-limit",
        type=int,
        default=DEFAULT_DELIVERY_LIMIT,
        help="x-delivery-limit of the quorum queue (default %(default)s)",
    )
    parser.add_argument(
        "--metrics-port",
        type=int,
        default=None,
        help="serve Prometheus metrics on this port at /metrics (default: off)",
    )
    parser.add_argument(
        "--metrics-host",
        default="127.0.0.1",
        help="address the metrics endpoint binds (default %(default)s: this machine only; "
        "0.0.0.0 for a scraper elsewhere, behind your firewall: it has no authentication)",
    )
    parser.add_argument(
        "--drain-timeout",
        type=float,
        default=30.0,
        help="seconds to finish in-flight requests on SIGTERM/SIGINT (default %(default)s)",
    )
    journal = parser.add_mutually_exclusive_group()
    journal.add_argument(
        "--journal",
        default="actorsched-journal.sqlite",
        metavar="PATH|URL",
        help="where acknowledged claims survive restarts: the path of an SQLite file (one "
        "serve per file), or a postgresql:// URL shared by an active/standby pair "
        "(default %(default)s in the current directory)",
    )
    journal.add_argument(
        "--no-journal",
        action="store_true",
        help="keep state in memory only: a restart forgets every claim, and a standby "
        "would take over with nothing (no fail-over)",
    )
    parser.add_argument(
        "--shard",
        default=DEFAULT_SHARD,
        help="the name of this scheduler's state and epoch in a postgresql:// journal; "
        "independent schedulers share one database under different shards (default "
        "%(default)s)",
    )
    parser.add_argument(
        "--follow-interval",
        type=float,
        default=DEFAULT_FOLLOW_INTERVAL,
        help="seconds between a standby's reads of the journal (default %(default)s)",
    )
    parser.add_argument(
        "--log-level",
        default="INFO",
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        type=str.upper,
        help="(default %(default)s)",
    )
    parser.add_argument(
        "--enabled-filters",
        type=_filter_list,
        default=None,
        metavar="NAMES",
        help="comma-separated filters to run, e.g. the default ones plus "
        "AggregateInstanceExtraSpecsFilter (default: SchedulerConfig's, Nova's defaults)",
    )


def _filter_list(text: str) -> list[str]:
    names = [name.strip() for name in text.split(",") if name.strip()]
    try:
        SchedulerConfig(enabled_filters=names)
    except ValidationError as exc:
        raise argparse.ArgumentTypeError(exc.errors()[0]["msg"]) from None
    return names


def _build_scheduler(args: argparse.Namespace) -> Scheduler:
    # acks follow answers, and with a journal the owner answers only once a batch is durable
    journal = None if args.no_journal else open_journal(args.journal, shard=args.shard)
    filters = getattr(args, "enabled_filters", None)
    config = SchedulerConfig(
        mailbox_size=args.mailbox_size,
        max_waiting=args.max_waiting,
        **({} if filters is None else {"enabled_filters": filters}),
    )
    return Scheduler(
        config,
        journal=journal,
        follow_interval=args.follow_interval,
    )


async def serve(args: argparse.Namespace, stop: asyncio.Event | None = None) -> int:
    """Run the service until SIGTERM or SIGINT (or until ``stop`` is set).

    It starts as a standby (following the journal) and becomes the owner on
    its first delivery. Returns 0 after a clean stop, 1 after a fail-stop
    (a journal error, or another owner took the shard over).
    """
    stop = stop if stop is not None else asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    scheduler = _build_scheduler(args)
    code = 0
    try:
        await scheduler.follow()
        metrics = ServiceMetrics(scheduler)
        endpoint: MetricsServer | None = None
        service = SchedulerService(
            scheduler,
            args.amqp_url,
            queue=args.queue,
            prefetch=args.prefetch,
            max_body_bytes=args.max_body_bytes,
            max_reply_bytes=args.max_reply_bytes,
            delivery_limit=args.delivery_limit,
            metrics=metrics,
            drain_timeout=args.drain_timeout,
        )
        try:
            if args.metrics_port is not None:
                endpoint = MetricsServer(metrics, host=args.metrics_host, port=args.metrics_port)
                await endpoint.start()
            await service.start()
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
    """Entry point of ``actorsched serve``."""
    logging.basicConfig(
        level=args.log_level,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        return asyncio.run(serve(args))
    except (ValueError, SchedulerError, aiormq.exceptions.AMQPConnectionError, OSError) as exc:
        log.error("actorsched serve failed to start: %s", exc)
        return 1
