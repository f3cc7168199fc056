# Sourced by the ensure-*.sh scripts: as_root runs a command that needs root (installing
# a missing package, starting the machine's own broker or database) as root, or through
# sudo without a password prompt (sudo -n). Nothing else in `make test` needs root: the
# fault tests' own RabbitMQ node and PostgreSQL cluster run as whoever runs the tests.
# Without root, it says in one line what it needs and fails.

can_be_root() {
    [ "$(id -u)" -eq 0 ] || { command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; }
}

as_root() {
    if [ "$(id -u)" -eq 0 ]; then
        "$@"
    elif can_be_root; then
        sudo -n -- "$@"
    else
        echo "make test: \`$*\` needs root: run as root or with sudo without a password, or ${AS_ROOT_ELSE:-do it yourself first}" >&2
        return 1
    fi
}
