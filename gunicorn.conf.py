"""gunicorn settings of the shipped server (read from the working directory: Dockerfile, compose, scripts).

A request line may be as long as gunicorn allows (8190 bytes, its maximum), so
every message id the library accepts is fetchable even fully percent-encoded;
the API itself answers longer URLs than ``AGENT_SESSIONS_API_MAX_URL_BYTES``
(4096) with a JSON 414 before gunicorn's own plain-text one is reached.
"""

limit_request_line = 8190
