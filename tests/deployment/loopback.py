"""``[core] hostname_callable`` of the test deployment: log fetching stays on loopback."""


def hostname() -> str:
    return "127.0.0.1"
