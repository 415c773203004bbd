"""Before-prompt auto-recall: whether to search for memories, and how to show the hits.

``skip_reason`` says when a prompt is not worth a memory search (a greeting, a slash
command, an emoji, a couple of characters); ``recall_query`` turns a prompt into the
search query; ``format_context_block`` renders the memories found as the
``<relevant-memories>`` block that is put in front of the prompt.

Skip reasons, tried in order (a force phrase anywhere overrides all but ``empty``):

    reason          the prompt is
    empty           blank
    slash_command   a host command: "/reset", "/new", "/model gpt-5" (not "/etc/hosts ...")
    greeting        only greetings, thanks or acknowledgements, in en/de/zh/ja/ko/cs: "hi",
                    "thanks!", "ok 👍", "hallo", "danke", "你好", "谢谢", "こんにちは",
                    "ありがとう", "안녕", "감사합니다", "ahoj", "díky"
    emoji_only      emoji (and punctuation) without a letter or digit
    too_short       fewer than ``min_prompt_chars`` characters (``min_prompt_chars_cjk`` for
                    Chinese, Japanese, Korean)

Force phrases ("remember", "last time", "what did I", "erinnerst du dich", "上次",
"前回", "지난번", "pamatuješ" ...) make a short or greeting-like prompt searched anyway:
"hi, do you remember me?" asks for memories.

Recalled memories are untrusted: they were written by users and by earlier turns. Each
is escaped by ``memoryd_client.untrusted.escape_memory_text`` (one line, no control or
invisible characters, HTML-escaped so that ``</relevant-memories>`` in a memory cannot
close the block, cut to ``max_chars_per_memory`` with "…") and the block tells the model
not to follow instructions in it. That module is the one copy of the escaping, shared
with the clients that show memories to a model (``memoryd mcp``).
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from memoryd_client.untrusted import CONTEXT_HEADER, escape_memory_text, relevant_memories_block

from memoryd.core.capture import count_emoji
from memoryd.core.errors import ConfigError
from memoryd.core.records import Category
from memoryd.core.text import contains_cjk

__all__ = [
    "CONTEXT_HEADER",
    "DEFAULT_FORCE_PHRASES",
    "ContextConfig",
    "escape_memory_text",
    "format_context_block",
    "recall_query",
    "skip_reason",
]

DEFAULT_FORCE_PHRASES: tuple[str, ...] = (
    # English
    "remember",
    "recall",
    "last time",
    "what did i",
    "what did we",
    "did i tell you",
    "did i mention",
    "as i said",
    "as i mentioned",
    "what's my",
    "what is my",
    "my preference",
    # German
    "erinnerst du dich",
    "erinnere dich",
    "weißt du noch",
    "letztes mal",
    "was habe ich",
    "wie war mein",
    "wie heißt mein",
    # Chinese
    "记得",
    "上次",
    "之前说",
    "我说过",
    "我告诉过你",
    "我的名字",
    # Japanese
    "覚えて",
    "前回",
    "この前",
    "以前話した",
    "言ったっけ",
    "私の名前",
    # Korean
    "기억",
    "지난번",
    "저번에",
    "전에 말한",
    "내 이름",
    # Czech
    "pamatuješ",
    "vzpomeň",
    "vzpomínáš",
    "minule",
    "naposledy",
    "co jsem ti říkal",
    "jak se jmenuju",
)


@dataclass(frozen=True, slots=True)
class ContextConfig:
    """Limits for auto-recall."""

    min_prompt_chars: int = 10
    """Shorter prompts are not searched (OpenClaw used 5; short Latin prompts are noise)."""
    min_prompt_chars_cjk: int = 3
    """The same for prompts with Chinese, Japanese or Korean: "上次呢" is a real question."""
    force_phrases: tuple[str, ...] = DEFAULT_FORCE_PHRASES
    """Case-insensitive substrings that make any non-blank prompt searched."""
    max_results: int = 3
    """Most memories injected in front of one prompt."""
    overfetch: int = 10
    """How many candidates to fetch from the store before filtering to ``max_results``."""
    min_score: float = 0.28
    """Memories whose final score is below this are not injected (hooks.min_score; the
    README says how it was chosen)."""
    max_chars_per_memory: int = 500
    """Each injected memory is cut to this many characters (after escaping), with "…"."""
    max_query_chars: int = 1000
    """The search query made from the prompt is cut to this many characters."""

    def __post_init__(self) -> None:
        for name in ("min_prompt_chars", "min_prompt_chars_cjk", "max_results"):
            if getattr(self, name) < 0:
                raise ConfigError(f"{name} is {getattr(self, name)}; it must be >= 0")
        if self.overfetch < self.max_results:
            raise ConfigError(
                f"overfetch is {self.overfetch}; it must be >= max_results ({self.max_results})"
            )
        if not math.isfinite(self.min_score):
            raise ConfigError(f"min_score is {self.min_score}; it must be a finite number")
        for name in ("max_chars_per_memory", "max_query_chars"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} is {getattr(self, name)}; it must be >= 1")
        for phrase in self.force_phrases:
            if not phrase.strip():
                raise ConfigError("force_phrases must not contain blank entries")


# --- skip_reason ------------------------------------------------------------------------

_SLASH_COMMAND = re.compile(r"^/[A-Za-z][\w-]*(?:\s|$)")

_GREETING_WORDS = (
    # English
    "hi|hello|hey|heya|hiya|yo|howdy|good morning|good afternoon|good evening|good night"
    "|morning|thanks|thank you|thx|ty|cheers|ok|okay|k|kk|sure|yes|yep|yeah|no|nope|cool"
    "|nice|great|perfect|got it|bye|goodbye|see you|lol|hmm+|there|all|everyone|so much"
    "|a lot|very much|again"
    # German
    "|hallo|moin|servus|grüß gott|guten morgen|guten tag|guten abend|gute nacht|danke"
    "|danke schön|dankeschön|vielen dank|tschüss|tschüs|ciao|alles klar|ja|nein|super"
    "|prima|genau|passt"
    # Chinese
    "|你好|您好|嗨|哈喽|谢谢|谢谢你|多谢|好的|好|嗯+|行|可以|早上好|早|晚上好|晚安|再见"
    "|拜拜|收到|明白了|知道了"
    # Japanese
    "|こんにちは|こんばんは|おはよう|おはようございます|ありがとう|ありがとうございます"
    "|どうも|はい|いいえ|うん|了解|了解です|わかった|わかりました|さようなら|おやすみ"
    "|おやすみなさい|よろしく|よろしくお願いします"
    # Korean
    "|안녕|안녕하세요|감사합니다|고마워|고마워요|네|예|아니요|응|좋아요|알겠어요"
    "|알겠습니다|잘 자|잘 자요|수고하세요"
    # Czech
    "|ahoj|čau|nazdar|dobrý den|dobré ráno|dobrý večer|dobrou noc|děkuji|děkuju|díky|dík"
    "|jo|ano|ne|nashle|na shledanou|jasně|rozumím"
)
_GREETING = re.compile(rf"(?:{_GREETING_WORDS})(?: ?(?:{_GREETING_WORDS}))*")
_SPACES = re.compile(r"\s+")


def _words_only(text: str) -> str:
    """Letters, digits and single spaces: punctuation, symbols and emoji become spaces."""
    kept = "".join(" " if unicodedata.category(ch)[0] in "PSZC" else ch for ch in text)
    return _SPACES.sub(" ", kept).strip().casefold()


def _has_force_phrase(text: str, config: ContextConfig) -> bool:
    folded = text.casefold()
    return any(phrase.casefold() in folded for phrase in config.force_phrases)


def skip_reason(prompt: str, config: ContextConfig) -> str | None:
    """Why auto-recall should not search for ``prompt``, or None if it should."""
    text = prompt.strip()
    if not text:
        return "empty"
    if _has_force_phrase(text, config):
        return None
    if _SLASH_COMMAND.match(text):
        return "slash_command"
    words = _words_only(text)
    if words and _GREETING.fullmatch(words):
        return "greeting"
    if not words and count_emoji(text) > 0:
        return "emoji_only"
    minimum = config.min_prompt_chars_cjk if contains_cjk(text) else config.min_prompt_chars
    if len(text) < minimum:
        return "too_short"
    return None


# --- recall_query -----------------------------------------------------------------------

_MEDIA_NOTE = re.compile(
    r"^\s*\[(?:media\s+attached|image|audio|video|file|attachment|voice\s+message|sticker"
    r"|document)\b[^\n]*$",
    re.IGNORECASE | re.MULTILINE,
)
_INJECTED_BLOCK = re.compile(
    r"<relevant-memories>.*?(?:</relevant-memories>|$)", re.IGNORECASE | re.DOTALL
)


def recall_query(prompt: str, config: ContextConfig) -> str:
    """The text to search memories with: the prompt without media-attachment notes or an
    already injected ``<relevant-memories>`` block, whitespace collapsed, cut to
    ``max_query_chars``."""
    text = _INJECTED_BLOCK.sub(" ", prompt)
    text = _MEDIA_NOTE.sub(" ", text)
    return _SPACES.sub(" ", text).strip()[: config.max_query_chars].rstrip()


# --- format_context_block ---------------------------------------------------------------


def _label(category: Category) -> str:
    return "other" if category is Category.UNSPECIFIED else category.name.lower()


def _day(when: datetime) -> str:
    if when.tzinfo is not None:
        when = when.astimezone(UTC)
    return when.date().isoformat()


def format_context_block(
    items: Sequence[tuple[str, Category, float, datetime | None]],
    config: ContextConfig,
) -> str:
    """The ``<relevant-memories>`` block for recalled ``(text, category, score, created)``
    items, best first; "" when there is nothing to inject.

    Items scoring below ``min_score`` are dropped and at most ``max_results`` are shown,
    in the order given, so no caller can inject more than the configured limits.
    """
    lines: list[str] = []
    for text, category, score, created in items:
        if len(lines) == config.max_results:
            break
        if not score >= config.min_score:  # also drops NaN
            continue
        body = escape_memory_text(text, config.max_chars_per_memory)
        if not body:
            continue
        day = f" ({_day(created)})" if created is not None else ""
        lines.append(f"{len(lines) + 1}. [{_label(category)}] {body}{day}")
    return relevant_memories_block(lines)
