"""Keep credentials out of the access log.

The REST upload URL carries its one-time credential as `?token=…` (the stock client PUTs to
the URL it is given, so it cannot move to a header), and uvicorn logs every request's full
path. This filter rewrites the logged path before the record is formatted.
"""

from __future__ import annotations

import logging
import re

_SECRET_PARAM = re.compile(
    r"(?P<name>(?:^|[?&;])(?:token|access_token|api_key|key|signature|x-amz-signature|"
    r"x-amz-credential|x-amz-security-token)=)[^&;\s\"]*",
    re.IGNORECASE,
)


def redact(text: str) -> str:
    """`text` with the values of credential-looking query parameters replaced by `***`."""
    return _SECRET_PARAM.sub(r"\g<name>***", text)


class RedactSecrets(logging.Filter):
    """A logging filter that redacts credentials in a record's message arguments."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple):
            record.args = tuple(redact(a) if isinstance(a, str) else a for a in record.args)
        elif isinstance(record.msg, str):
            record.msg = redact(record.msg)
        return True


def install(logger_names: tuple[str, ...] = ("uvicorn.access", "uvicorn.error")) -> None:
    """Attach the filter to uvicorn's loggers (idempotent: once per process)."""
    for name in logger_names:
        logger = logging.getLogger(name)
        if not any(isinstance(f, RedactSecrets) for f in logger.filters):
            logger.addFilter(RedactSecrets())
