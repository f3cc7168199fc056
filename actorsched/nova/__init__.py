"""The Nova adapter: Nova's scheduler RPC API on the same owner as the native protocol.

``actorsched serve --nova-config /etc/nova/nova.conf`` reads the file as Nova 34
reads it (:mod:`.conf`) and answers what ``nova-scheduler`` consumes
(:mod:`.endpoint`): oslo.messaging's wire (:mod:`.wire`) and Nova's versioned
objects (:mod:`.objects`), spoken over aio-pika; ``nova`` is never imported.
"""
