"""The search query language, parsed by our code into a small AST.

Grammar (web-search style; anything else is literal text)::

    query   := item*
    item    := "-" atom                 exclusion: no hit contains it
             | atom ("OR" atom)*        a group: a hit contains at least one
    atom    := '"' phrase '"'           an unterminated quote runs to the end
             | word                     a run of non-space, non-quote characters

Groups are ANDed; ``OR`` (upper case, between two positive atoms) binds
tighter than the implicit AND, as on web search engines, so ``a b OR c``
means ``a AND (b OR c)``.  The AST is a conjunction (:class:`Query`) of
disjunctions (:class:`AnyOf`) of :class:`Term` plus excluded terms; the
backends compile it into FTS5 MATCH strings or tsquery expressions whose
user text is always quoted or bound, never engine syntax.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

MAX_TERMS = 64
"""Atoms kept per query (after de-duplication); later ones are ignored."""

SHORT_CJK = 3
"""Unspaced-script (CJK, Thai, …) terms shorter than this (in characters) cannot use a trigram index."""

# Scripts written without spaces between words, searched by substring (a word index would
# only find whole runs between punctuation).  The one place that decides which text that is;
# "CJK" in names elsewhere means any of these.  Scripts that put spaces (or a word separator)
# between words (Sundanese, Ethiopic, Vai) stay on the stemmed word index.  Tibetan marks
# syllables (tsheg), not words, so it is substring-searched too.
UNSPACED_RANGES: tuple[tuple[str, str], ...] = (
    ("\u0e00", "\u0e7f"),  # Thai
    ("\u0e80", "\u0eff"),  # Lao
    ("\u0f00", "\u0fff"),  # Tibetan
    ("\u1000", "\u109f"),  # Myanmar (Burmese, Shan, Mon)
    ("\u1100", "\u11ff"),  # Hangul Jamo
    ("\u1780", "\u17ff"),  # Khmer
    ("\u1950", "\u197f"),  # Tai Le
    ("\u1980", "\u19df"),  # New Tai Lue
    ("\u19e0", "\u19ff"),  # Khmer symbols
    ("\u1a00", "\u1aaf"),  # Buginese, Tai Tham (Lanna)
    ("\u1b00", "\u1b7f"),  # Balinese
    ("\u2e80", "\u2fdf"),  # CJK radicals
    ("\u3005", "\u3007"),  # 々〆〇
    ("\u3021", "\u3029"),  # Suzhou numerals
    ("\u3031", "\u3035"),  # kana repeat marks
    ("\u303b", "\u303c"),  # 〻〼
    ("\u3040", "\u30ff"),  # Hiragana, Katakana
    ("\u3130", "\u318f"),  # Hangul compatibility Jamo
    ("\u31f0", "\u31ff"),  # Katakana phonetic extensions
    ("\u3400", "\u4dbf"),  # CJK extension A
    ("\u4e00", "\u9fff"),  # CJK unified ideographs
    ("\ua000", "\ua4cf"),  # Yi syllables and radicals
    ("\ua960", "\ua97f"),  # Hangul Jamo extended A
    ("\ua980", "\ua9df"),  # Javanese
    ("\ua9e0", "\ua9ff"),  # Myanmar extended B
    ("\uaa60", "\uaa7f"),  # Myanmar extended A
    ("\uaa80", "\uaadf"),  # Tai Viet
    ("\uac00", "\ud7ff"),  # Hangul syllables, Jamo extended B
    ("\uf900", "\ufaff"),  # CJK compatibility ideographs
    ("\uff66", "\uff9f"),  # half-width Katakana
    ("\U00020000", "\U0003134f"),  # CJK extensions B–G
)
"""Inclusive code point ranges of the scripts searched by substring (also used by SQL patterns)."""

_CJK = re.compile("[" + "".join(f"{lo}-{hi}" for lo, hi in UNSPACED_RANGES) + "]")


def is_cjk(text: str) -> bool:
    """True when ``text`` contains a character of a script written without spaces (CJK, Thai, Khmer, …)."""
    return _CJK.search(text) is not None


def _word_char(ch: str) -> bool:
    return unicodedata.category(ch)[0] in "LNM"


def _matchable(text: str) -> bool:
    # A word index only sees letters and numbers: "*" or "--" can match nothing.
    return any(unicodedata.category(ch)[0] in "LN" for ch in text)


@dataclass(frozen=True)
class Term:
    """One atom: a word or a quoted phrase, exactly as the user typed it."""

    text: str
    phrase: bool = False

    @property
    def cjk(self) -> bool:
        """Searched by substring (trigram index) instead of by stemmed words."""
        return is_cjk(self.text)

    @property
    def caseless(self) -> bool:
        """No character has case (pure CJK, Thai, …): substring tests need no case folding."""
        return self.text.lower() == self.text.upper()

    @property
    def short(self) -> bool:
        """A CJK term too short for a trigram index (served by a bounded scan)."""
        return self.cjk and len(self.text) < SHORT_CJK

    @property
    def core(self) -> str:
        """The text without leading and trailing punctuation (``(v1.2.3),`` → ``v1.2.3``)."""
        start, end = 0, len(self.text)
        while start < end and not _word_char(self.text[start]):
            start += 1
        while end > start and not _word_char(self.text[end - 1]):
            end -= 1
        return self.text[start:end]

    @property
    def compound(self) -> bool:
        """One spaceless term with punctuation inside (``db-replica-3``, ``v1.2.3``, ``a@b.io``).

        Word indexes cut it into several tokens; a hit must contain the term itself
        (its :attr:`core`, case-insensitively), which both compilers test on top of the index.
        """
        core = self.core
        return not self.cjk and not any(ch.isspace() for ch in core) and not all(_word_char(ch) for ch in core)


@dataclass(frozen=True)
class AnyOf:
    """A disjunction: a hit contains at least one of ``terms``."""

    terms: tuple[Term, ...]

    @property
    def indexed(self) -> bool:
        """Every alternative can be answered from an index (no short CJK term)."""
        return not any(t.short for t in self.terms)


@dataclass(frozen=True)
class Query:
    """A conjunction of groups, minus excluded terms. Falsy when nothing can match."""

    groups: tuple[AnyOf, ...] = ()
    excluded: tuple[Term, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.groups)

    @property
    def terms(self) -> list[Term]:
        """The positive terms, in query order."""
        return [t for g in self.groups for t in g.terms]

    def words(self) -> list[str]:
        """The positive terms' texts (what the seed's ``query_terms`` returned)."""
        return [t.text for t in self.terms]

    @classmethod
    def all_of(cls, words: Iterable[object]) -> Query:
        """Each word a literal term, all required (for callers that pass plain word lists)."""
        builder = _Builder()
        for word in words:
            text = _clean(str(word)).strip()
            if text:
                builder.add_group([Term(text)])
        return builder.build()


def _clean(text: str) -> str:
    # NUL, lone surrogates and control characters cannot be bound on every
    # database; they separate atoms like spaces do.
    return "".join(" " if unicodedata.category(ch) in ("Cc", "Cs") else ch for ch in text)


def _tokens(text: str) -> Iterator[tuple[bool, str, bool]]:
    """``(negated, text, quoted)`` for each atom of ``text``."""
    i, n = 0, len(text)
    while i < n:
        if text[i].isspace():
            i += 1
            continue
        negated = text[i] == "-" and i + 1 < n and not text[i + 1].isspace()
        if negated:
            i += 1
        if text[i] == '"':
            end = text.find('"', i + 1)
            end = n if end < 0 else end
            yield negated, text[i + 1 : end].strip(), True
            i = end + 1
            continue
        j = i
        while j < n and not text[j].isspace() and text[j] != '"':
            j += 1
        yield negated, text[i:j], False
        i = j


class _Builder:
    """Collects groups and exclusions, de-duplicated and capped at MAX_TERMS."""

    def __init__(self) -> None:
        self.groups: list[list[Term]] = []
        self.excluded: list[Term] = []
        self.count = 0

    def _room(self) -> bool:
        return self.count < MAX_TERMS

    def add_group(self, terms: list[Term]) -> None:
        if self._room():
            self.groups.append([])
            self.extend(terms)

    def extend(self, terms: list[Term]) -> None:
        group = self.groups[-1]
        for term in terms:
            if self._room() and term not in group:
                group.append(term)
                self.count += 1

    def exclude(self, term: Term) -> None:
        if self._room() and term not in self.excluded:
            self.excluded.append(term)
            self.count += 1

    def build(self) -> Query:
        groups: list[AnyOf] = []
        for terms in self.groups:
            group = AnyOf(tuple(terms))
            if terms and group not in groups:
                groups.append(group)
        return Query(tuple(groups), tuple(self.excluded))


def parse(text: object, *, max_length: int | None = None) -> Query:
    """Parse a user's query; never raises (non-text input is an empty query)."""
    if not isinstance(text, str):
        return Query()
    tokens = [
        (neg, Term(body, quoted), quoted)
        for neg, body, quoted in _tokens(_clean(text[:max_length]))
        if _matchable(body)
    ]
    builder = _Builder()
    previous_positive = False
    joining = False
    for k, (negated, term, quoted) in enumerate(tokens):
        if negated:
            builder.exclude(term)
            previous_positive = joining = False
            continue
        following = tokens[k + 1] if k + 1 < len(tokens) else None
        is_or = (
            not quoted
            and term.text == "OR"
            and previous_positive
            and not joining
            and following is not None
            and not following[0]
            and not (following[1].text == "OR" and not following[2])
        )
        if is_or:
            joining = True
            continue
        if joining and builder.groups:
            builder.extend([term])
        else:
            builder.add_group([term])
        joining = False
        previous_positive = True
    return builder.build()
