"""Turn a user's search text into safe terms: no user input ever reaches an engine as syntax."""

from __future__ import annotations

import re

from .. import conf

_WORD = re.compile(r"\w+", re.UNICODE)


def query_terms(query: object) -> list[str]:
    """The words of ``query`` (ANDed by every backend); ``[]`` for blank or non-text input."""
    if not isinstance(query, str):
        return []
    return _WORD.findall(query[: conf.max_query_length()])
