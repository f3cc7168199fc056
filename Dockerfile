# actorsched: the scheduler service (`serve`) and the host agent (`report`) in one image.
#   docker build -t actorsched .
#   docker run --rm actorsched --version
# Small (python slim, the wheel and its dependencies only) and not root.
FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY actorsched ./actorsched
RUN pip wheel --no-cache-dir --wheel-dir /wheels .

FROM python:3.11-slim
RUN useradd --system --uid 10001 --home-dir /var/lib/actorsched --create-home \
        --shell /usr/sbin/nologin actorsched \
    && chmod 0700 /var/lib/actorsched
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir --no-compile /wheels/*.whl && rm -rf /wheels
USER actorsched
WORKDIR /var/lib/actorsched
# the default SQLite journal lives here (settings.default_journal_path); the
# metrics stay on the container's loopback unless ACTORSCHED_METRICS_HOST says
# otherwise (deploy/compose.yaml sets 0.0.0.0 and publishes on the host's loopback)
ENV STATE_DIRECTORY=/var/lib/actorsched \
    ACTORSCHED_METRICS_PORT=9100 \
    PYTHONUNBUFFERED=1
VOLUME ["/var/lib/actorsched"]
EXPOSE 9100
# alive, not ready: a standby is healthy though /readyz says 503
HEALTHCHECK --interval=10s --timeout=3s --start-period=20s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:' + os.environ.get('ACTORSCHED_METRICS_PORT', '9100') + '/healthz', timeout=2)"]
ENTRYPOINT ["actorsched"]
CMD ["serve"]
