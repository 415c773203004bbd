"""After-turn auto-capture: which messages of a finished turn become memories.

``plan_capture`` is pure: it is given the turn's messages, the recently captured texts and
a :class:`CaptureConfig`, and returns one :class:`CaptureDecision` per message. The caller
stores the captured ones and appends their texts to its recent-texts history. Messages
refused only for ``turn_limit`` are not "seen": they may be captured in a later turn.

Checks run in this order; the first that fails is the message's reason:

    reason                      the message is skipped because
    not_user_role               it is not from the user (assistant text is never captured)
    empty                       it is blank
    too_long                    it has more than ``max_chars`` characters
    already_injected_memories   it contains a ``<relevant-memories>`` block recalled earlier
    envelope_metadata           it is transport metadata: "[Telegram ...]" header lines,
                                "From: ... To: ..." mail headers, "message_id:"-style fields,
                                a JSON object or array, "<<<EXTERNAL_UNTRUSTED_CONTENT>>>"
                                markers, "[media attached: ...]" notes, "[... 2026-03-01
                                10:00]" timestamp prefixes
    injection                   it looks like a prompt injection (``core.injection``)
    too_short                   it has fewer than ``min_chars`` (``min_chars_cjk`` when it
                                contains Chinese, Japanese or Korean)
    markup_heavy                tags and markdown punctuation exceed ``max_markup_ratio``
    emoji_heavy                 emoji exceed ``max_emoji_ratio`` of the visible characters
    no_trigger                  no memory trigger phrase (``TRIGGERS``, custom_triggers)
    question                    it asks rather than tells ("do you remember ...?", "what is
                                my ...?"), unless it also says "remember that"/"note that"
    duplicate_recent            it equals (after NFC, whitespace collapse, casefold) one of
                                the last ``recent_window`` recent texts
    duplicate_in_turn           it equals a message captured earlier in this turn
    turn_limit                  ``max_per_turn`` messages of this turn are already captured
    captured                    none of the above: store it, under ``category``

Trigger phrases (whole words in Latin scripts, substrings in CJK; an e-mail address, a
phone number or one of ``custom_triggers`` also counts):

    en  remember (that), don't forget, note that, keep in mind, important:, I prefer/like/
        love/hate/want/need, I'd rather, my ... is, ... is my, call me, always, never,
        from now on, favourite, we decided, let's go with
    de  merk dir, vergiss nicht, denk daran, wichtig, ich bevorzuge/mag/liebe/hasse/möchte,
        lieber, Lieblings..., mein ... ist, ist mein, immer, nie, ab jetzt, künftig,
        wir haben ... entschieden
    zh  记住, 记得, 别忘了, 请注意, 重要, 我喜欢, 我偏好, 我讨厌, 最喜欢, 我的…是, 是我的, 以后,
        今后, 总是, 一直, 永远, 从不, 决定
    ja  覚えて, 忘れないで, メモして, 大事, 重要, 好き, 嫌い, 苦手, いつも, 常に, 必ず, 絶対,
        今後, これからは, 決めた, 私の…は
    ko  기억해, 잊지 마, 명심해, 중요, 좋아해, 싫어해, 선호, 항상, 언제나, 절대, 앞으로, 이제부터,
        결정했, 내/제 …은/는
    cs  zapamatuj si, pamatuj si, nezapomeň, poznamenej si, důležité, preferuji, radši,
        mám rád(a), miluji, nesnáším, chci, vždy, nikdy, od teď, rozhodli jsme, můj ... je

Improvements over the OpenClaw rules: trigger words match whole words ("always" not in
"hallways"), questions are not stored as memories ("Do you remember my wife's name?"
used to be captured for "remember"), emoji and markup limits are ratios rather than
absolute counts, and the CJK minimum length is shorter than the Latin one.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass

from memoryd.core.categorize import CONTACT_DETAILS, detect_category
from memoryd.core.errors import ConfigError
from memoryd.core.injection import detect_injection
from memoryd.core.records import Category
from memoryd.core.text import contains_cjk, normalize_text

__all__ = [
    "TRIGGERS",
    "CaptureConfig",
    "CaptureDecision",
    "count_emoji",
    "dedupe_key",
    "markup_ratio",
    "plan_capture",
]

MAX_CUSTOM_TRIGGERS = 50
MAX_CUSTOM_TRIGGER_CHARS = 100


@dataclass(frozen=True, slots=True)
class CaptureConfig:
    """Limits for auto-capture. The defaults are those of the OpenClaw plugin users know."""

    min_chars: int = 10
    """Shortest message worth remembering, in characters."""
    min_chars_cjk: int = 4
    """The same for text containing Chinese, Japanese or Korean, which is denser."""
    max_chars: int = 500
    """Longest message captured (OpenClaw ``captureMaxChars``)."""
    max_per_turn: int = 3
    """Most memories captured from one turn."""
    recent_window: int = 60
    """How many recent captured texts a new one is compared with for duplicates."""
    custom_triggers: tuple[str, ...] = ()
    """Extra literal trigger phrases (case-insensitive substring; at most 50 of 100 chars)."""
    require_trigger: bool = True
    """Capture only messages with a trigger phrase; False captures any acceptable message."""
    skip_questions: bool = True
    """Do not capture questions, which ask for memories rather than state them."""
    max_markup_ratio: float = 0.3
    """Largest share of visible characters that may be tags or markdown punctuation."""
    max_emoji_ratio: float = 0.2
    """Largest share of visible characters that may be emoji."""

    def __post_init__(self) -> None:
        for name in ("min_chars", "min_chars_cjk", "max_per_turn", "recent_window"):
            if getattr(self, name) < 0:
                raise ConfigError(f"{name} is {getattr(self, name)}; it must be >= 0")
        if self.max_chars < max(self.min_chars, self.min_chars_cjk, 1):
            raise ConfigError(
                f"max_chars is {self.max_chars}; it must be >= min_chars ({self.min_chars}),"
                f" min_chars_cjk ({self.min_chars_cjk}) and 1"
            )
        for name in ("max_markup_ratio", "max_emoji_ratio"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ConfigError(f"{name} is {value}; it must be between 0 and 1")
        if len(self.custom_triggers) > MAX_CUSTOM_TRIGGERS:
            raise ConfigError(
                f"custom_triggers has {len(self.custom_triggers)} entries;"
                f" the limit is {MAX_CUSTOM_TRIGGERS}"
            )
        for trigger in self.custom_triggers:
            if not trigger.strip() or len(trigger) > MAX_CUSTOM_TRIGGER_CHARS:
                raise ConfigError(
                    f"custom_triggers entry {trigger!r} must be non-blank and at most"
                    f" {MAX_CUSTOM_TRIGGER_CHARS} characters"
                )


@dataclass(frozen=True, slots=True)
class CaptureDecision:
    index: int
    """Position of the message in the turn."""
    captured: bool
    reason: str
    """A stable snake_case code (see the module docstring)."""
    category: Category | None
    """Set when captured."""
    text: str
    """The message as it would be stored (``core.text.normalize_text``: NFC, trimmed)."""
    detail: str = ""
    """For people reading logs: the trigger that matched, the limit that was exceeded."""


# --- triggers ---------------------------------------------------------------------------

_B = r"(?<!\w)"
_E = r"(?!\w)"
_FLAGS = re.IGNORECASE | re.MULTILINE


def _words(*phrases: str) -> str:
    return _B + "(?:" + "|".join(phrases) + ")" + _E


def _chars(*phrases: str) -> str:
    return "(?:" + "|".join(phrases) + ")"


# Explicit requests to store something. They mark a message as a memory even when it
# ends with a question mark ("Remember that I'm vegan, ok?").
_STORE_REQUESTS: dict[str, str] = {
    "en": _words(
        r"(?:please\s+)?remember\s+(?:that|this)",
        r"remember\s*:",
        r"don'?t\s+forget",
        r"do\s+not\s+forget",
        r"note\s+(?:that|this|down)",
        r"make\s+a\s+note",
        r"take\s+note",
        r"keep\s+in\s+mind",
        r"for\s+future\s+reference",
        r"important\s*:",
        r"save\s+this",
    ),
    "de": _words(
        r"merk\s+dir",
        r"merke\s+dir",
        r"merken\s+sie\s+sich",
        r"vergiss\s+nicht",
        r"nicht\s+vergessen",
        r"denk\s+daran",
        r"denke\s+daran",
        r"notier(?:e)?\s+(?:dir|das)",
        r"wichtig\s*:",
    ),
    "zh": _chars("记住", "别忘了", "不要忘记", "不要忘了", "请注意", "请记下"),
    "ja": _chars(
        r"覚えて(?:おいて|ください|ね|て)?(?!\s*[?？る]|い|ま)",
        "忘れないで",
        "メモして",
    ),
    "ko": _chars(
        r"기억해\s*(?:줘|두세요|둬|주세요)?(?!\s*[?？])",
        "기억하세요",
        r"잊지\s*마",
        "명심해",
    ),
    "cs": _words(
        r"zapamatuj(?:te)?\s+si",
        r"pamatuj(?:te)?\s+si",
        r"nezapomeň(?:te)?",
        r"poznamenej(?:te)?\s+si",
        r"důležité\s*:",
    ),
}

# Phrases that make a user message a candidate memory: statements about themselves,
# their preferences, standing rules, decisions.
_STATEMENTS: dict[str, str] = {
    "en": _words(
        r"remember",
        r"i\s+(?:really\s+|do\s+not\s+|don'?t\s+)?(?:prefer|like|love|hate|dislike|want|need"
        r"|use|always|never|usually)",
        r"i'?d\s+rather",
        r"i\s+would\s+rather",
        r"i'?m\s+(?:allergic|vegan|vegetarian|based\s+in|from)",
        r"my\s+(?:[\w'-]+\s+){1,3}(?:is|are|was)",
        r"(?:is|are)\s+my",
        r"call\s+me",
        r"always",
        r"never",
        r"from\s+now\s+on",
        r"going\s+forward",
        r"important",
        r"prefer(?:s|red)?",
        r"favou?rite",
        r"we\s+(?:(?:have\s+|'ve\s+)?decided|agreed|will\s+use|chose)",
        r"let'?s\s+(?:go\s+with|use|stick\s+with)",
    ),
    "de": _words(
        r"ich\s+(?:bevorzuge|mag|liebe|hasse|möchte|will|brauche|nutze|verwende)",
        r"lieber",
        r"am\s+liebsten",
        r"lieblings\w*",
        r"(?:mein|meine|meinen|unser|unsere)\s+[\w-]+\s+(?:ist|sind|heißt|heisst)",
        r"ist\s+(?:mein|meine|unser|unsere)",
        r"immer",
        r"nie",
        r"niemals",
        r"ab\s+(?:jetzt|sofort)",
        r"künftig",
        r"von\s+nun\s+an",
        r"wir\s+haben\s+(?:\S+\s+){0,6}?(?:entschieden|beschlossen)",
        r"wir\s+(?:nehmen|verwenden|nutzen)",
        r"wichtig",
    ),
    "zh": _chars(
        "记得",
        "重要",
        "我喜欢",
        "我偏好",
        "偏好",
        "我更喜欢",
        "我爱",
        "我讨厌",
        "我不喜欢",
        "我想要",
        "我习惯",
        "最喜欢",
        r"我的.{1,10}是",
        "是我的",
        "以后",
        "今后",
        "从现在开始",
        "总是",
        "一直",
        "永远",
        "从不",
        "决定",
    ),
    "ja": _chars(
        "覚えて",
        "大事",
        "重要",
        "好き",
        "嫌い",
        "好み",
        "苦手",
        "お気に入り",
        "いつも",
        "常に",
        "必ず",
        "絶対",
        "決して",
        "今後",
        "これからは",
        "決めた",
        "決定",
        "ことにした",
        r"(?:私|僕|俺|わたし)の.{1,10}は",
    ),
    "ko": _chars(
        "기억해",
        "중요",
        "좋아해",
        "좋아합니다",
        "좋아하는",
        "싫어해",
        "싫어합니다",
        "선호",
        "항상",
        "언제나",
        "절대",
        "앞으로",
        "이제부터",
        "결정했",
        "하기로 했",
        r"(?:내|제)\s+\S+(?:은|는)",
    ),
    "cs": _words(
        r"preferuj[iu]",
        r"radši",
        r"raději",
        r"mám\s+r[áa]da?",
        r"nemám\s+r[áa]da?",
        r"miluj[iu]",
        r"nesnáším",
        r"chci",
        r"nechci",
        r"vždy",
        r"vždycky",
        r"nikdy",
        r"od\s+teď",
        r"odteď",
        r"rozhodli\s+jsme",
        r"budeme\s+používat",
        r"(?:můj|moje|má|mé)\s+\w+\s+je",
        r"je\s+(?:můj|moje)",
        r"oblíben\w*",
    ),
}

TRIGGERS: dict[str, re.Pattern[str]] = {
    lang: re.compile(f"{_STORE_REQUESTS[lang]}|{_STATEMENTS[lang]}", _FLAGS)
    for lang in _STORE_REQUESTS
}
"""Built-in trigger phrases per language (en, de, zh, ja, ko, cs)."""

_STORE_REQUEST = re.compile("|".join(_STORE_REQUESTS.values()), _FLAGS)

# Questions about memory ("do you remember ...") and questions in general.
_RECALL_QUESTION = re.compile(
    "|".join(
        [
            r"^\s*(?:do|did|can|could)\s+you\s+(?:still\s+)?(?:remember|recall)" + _E,
            r"^\s*(?:what|when|where|who)\s+did\s+i" + _E,
            r"^\s*(?:erinnerst\s+du\s+dich|weißt\s+du\s+noch|was\s+habe\s+ich)" + _E,
            r"^\s*(?:pamatuješ|vzpomeneš|víš)\s+si" + _E,
            r"^\s*你?还?记得",
            r"覚えて(?:る|います|ます)か?\s*[?？]?\s*$",
            r"기억(?:나|해)\s*[?？]",
        ]
    ),
    re.IGNORECASE,
)
_QUESTION = re.compile(
    "|".join(
        [
            r"[?？]\s*$",
            r"^\s*(?:what|who|whom|whose|where|when|why|how|which)" + _E,
            r"^\s*(?:do|does|did|can|could|would|will|are|is|was|should)\s+(?:you|i|we|my)" + _E,
            r"^\s*(?:was|wer|wo|wann|warum|wieso|weshalb|welche[rsnm]?)" + _E,
            r"^\s*(?:kannst|weißt|hast|bist)\s+du" + _E,
            r"^\s*(?:co|kdo|kde|kdy|proč|kolik)" + _E,
            r"[吗呢][。.]?\s*$",
            r"(?:ですか|ますか|でしょうか|かな|っけ)[。.]?\s*$",
            r"(?:까|니|나요|가요)[.。]?\s*$",
        ]
    ),
    re.IGNORECASE,
)

# --- rejections -------------------------------------------------------------------------

_INJECTED_MEMORIES = re.compile(r"</?\s*relevant-memories\b", re.IGNORECASE)

_ENVELOPE = re.compile(
    "|".join(
        [
            r"^\s*\[(?:telegram|whatsapp|signal|discord|slack|imessage|sms|matrix|e-?mail"
            r"|line|wechat|teams|messenger|irc|mattermost|googlechat|webchat)" + _E + r"[^\]\n]*\]",
            r"^\s*(?:message|msg|chat|sender|conversation|thread|channel|update|reply_to)"
            r"[_\s-]?id\s*[:=]",
            r"\"(?:message_id|chat_id|sender_id|conversation_id|update_id)\"\s*:",
            r"<<<\s*/?\s*[A-Z][A-Z_]{2,}\s*>>>",
            r"^\s*\[media\s+attached" + _E,
            r"^\s*\[(?:image|audio|video|file|attachment|voice\s+message|sticker|document)"
            r"(?:\s*[:\]]|\s+attached)",
            r"^\s*\[[^\]\n]*\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}[^\]\n]*\]",
            r"^\s*from:[^\n]*\S[^\n]*?(?:\s|^)to:\s*\S",
        ]
    ),
    _FLAGS,
)
_MAIL_HEADER = re.compile(
    r"^\s*(from|to|cc|bcc|subject|date|reply-to|message-id|sender|recipient):\s*\S",
    _FLAGS,
)

_TAG = re.compile(r"</?[A-Za-z][^<>\n]{0,200}>")
_MARKUP_CHARS = frozenset("*#`|~{}[]<>")
_RULE_LINE = re.compile(r"-{3,}|={3,}")

# Code points that are emoji pictographs; modifiers and joiners are not counted.
_EMOJI_RANGES = (
    (0x1F000, 0x1F1E5),
    (0x1F200, 0x1F3FA),
    (0x1F400, 0x1FAFF),
    (0x2600, 0x27BF),
    (0x2B00, 0x2BFF),
    (0x2300, 0x23FF),
)
_REGIONAL_INDICATORS = (0x1F1E6, 0x1F1FF)
_ZWJ = 0x200D
_NOT_VISIBLE = frozenset({0x200D, 0xFE0E, 0xFE0F, 0x20E3, *range(0x1F3FB, 0x1F400)})


def _is_emoji(cp: int) -> bool:
    return any(lo <= cp <= hi for lo, hi in _EMOJI_RANGES)


def _glyphs(text: str) -> tuple[int, int]:
    """(visible characters, emoji) as a reader counts them: whitespace, joiners, variation
    selectors and skin tones are not characters; a ZWJ sequence or a flag is one."""
    visible = emoji = flags = 0
    after_zwj = False
    for ch in text:
        cp = ord(ch)
        if cp == _ZWJ:
            after_zwj = True
            continue
        joined, after_zwj = after_zwj, False
        if ch.isspace() or cp in _NOT_VISIBLE or joined:
            continue
        if _REGIONAL_INDICATORS[0] <= cp <= _REGIONAL_INDICATORS[1]:
            flags += 1
            continue
        visible += 1
        emoji += _is_emoji(cp)
    pairs = (flags + 1) // 2
    return visible + pairs, emoji + pairs


def count_emoji(text: str) -> int:
    """Emoji as a reader sees them: a ZWJ sequence, a flag or a skin-toned emoji is one."""
    return _glyphs(text)[1]


def markup_ratio(text: str) -> float:
    """Share of visible characters that are tags (``<b>``) or markdown/markup punctuation
    (``* # ` | ~ { } [ ] < >`` and ``---`` rules)."""
    visible = _glyphs(text)[0]
    if visible == 0:
        return 0.0
    markup = sum(len(m.group()) for m in _TAG.finditer(text))
    rest = _TAG.sub(" ", text)
    markup += sum(len(m.group()) for m in _RULE_LINE.finditer(rest))
    rest = _RULE_LINE.sub(" ", rest)
    markup += sum(1 for ch in rest if ch in _MARKUP_CHARS)
    return markup / visible


def _emoji_ratio(text: str) -> float:
    visible, emoji = _glyphs(text)
    return emoji / visible if visible else 0.0


_WHITESPACE = re.compile(r"\s+")


def dedupe_key(text: str) -> str:
    """What two texts must share to count as the same memory: the store's normalisation
    (NFC, line endings), whitespace runs collapsed, casefolded."""
    return _WHITESPACE.sub(" ", normalize_text(text)).casefold()


def _envelope(text: str) -> str | None:
    m = _ENVELOPE.search(text)
    if m is not None:
        return " ".join(m.group().split())[:60]
    stripped = text.strip()
    if stripped[:1] in "{[" and stripped[-1:] in "}]":
        try:
            value = json.loads(stripped)
        except ValueError:
            pass
        else:
            if isinstance(value, dict | list):
                return "a JSON " + ("object" if isinstance(value, dict) else "array")
    headers = {m.group(1).lower() for m in _MAIL_HEADER.finditer(text)}
    if len(headers) >= 2:
        return "mail headers " + ", ".join(sorted(headers))
    return None


def _trigger(text: str, config: CaptureConfig) -> str | None:
    for lang, pattern in TRIGGERS.items():
        m = pattern.search(text)
        if m is not None:
            return f"trigger {' '.join(m.group().split())!r} ({lang})"
    m = CONTACT_DETAILS.search(text)
    if m is not None:
        return f"contact details {m.group()!r}"
    folded = text.casefold()
    for custom in config.custom_triggers:
        if custom.casefold() in folded:
            return f"custom trigger {custom!r}"
    return None


def _is_question(text: str) -> bool:
    if _RECALL_QUESTION.search(text):
        return True
    return _QUESTION.search(text) is not None and _STORE_REQUEST.search(text) is None


def _rejection(role: str, text: str, config: CaptureConfig) -> tuple[str, str]:
    """The first rule ``text`` fails, as (reason, detail); ("", trigger) if it passes."""
    if role.strip().lower() != "user":
        return "not_user_role", f"role {role!r}"
    if not text:
        return "empty", ""
    # Checked before the pattern rules so that their cost is bounded by max_chars.
    if len(text) > config.max_chars:
        return "too_long", f"{len(text)} chars; the limit is {config.max_chars}"
    if _INJECTED_MEMORIES.search(text):
        return "already_injected_memories", "contains a <relevant-memories> block"
    envelope = _envelope(text)
    if envelope is not None:
        return "envelope_metadata", envelope
    injection = detect_injection(text)
    if injection is not None:
        return "injection", injection
    cjk = contains_cjk(text)
    minimum = config.min_chars_cjk if cjk else config.min_chars
    if len(text) < minimum:
        kind = "CJK text" if cjk else "text"
        return "too_short", f"{len(text)} chars; {kind} needs {minimum}"
    markup = markup_ratio(text)
    if markup > config.max_markup_ratio:
        return "markup_heavy", f"{markup:.0%} markup; the limit is {config.max_markup_ratio:.0%}"
    emoji = _emoji_ratio(text)
    if emoji > config.max_emoji_ratio:
        return "emoji_heavy", f"{emoji:.0%} emoji; the limit is {config.max_emoji_ratio:.0%}"
    trigger = _trigger(text, config)
    if trigger is None and config.require_trigger:
        return "no_trigger", "no memory trigger phrase"
    if config.skip_questions and _is_question(text):
        return "question", "asks rather than states"
    return "", trigger or ""


def plan_capture(
    messages: Sequence[tuple[str, str]],
    recent_texts: Sequence[str],
    config: CaptureConfig,
) -> list[CaptureDecision]:
    """Decide, for each ``(role, text)`` message of a finished turn, whether to capture it.

    ``recent_texts`` are texts captured in earlier turns, oldest first; only the last
    ``config.recent_window`` of them are compared with. Returns one decision per message,
    in order.
    """
    window = recent_texts[-config.recent_window :] if config.recent_window else ()
    seen_recent = {dedupe_key(t) for t in window}
    seen_turn: set[str] = set()
    decisions: list[CaptureDecision] = []
    for index, (role, raw) in enumerate(messages):
        text = normalize_text(raw)
        reason, detail = _rejection(role, text, config)
        if not reason:
            key = dedupe_key(text)
            if key in seen_recent:
                reason, detail = "duplicate_recent", "captured in an earlier turn"
            elif key in seen_turn:
                reason, detail = "duplicate_in_turn", "captured earlier in this turn"
            elif len(seen_turn) >= config.max_per_turn:
                reason = "turn_limit"
                detail = f"{config.max_per_turn} already captured this turn"
            else:
                seen_turn.add(key)
                category = detect_category(text)
                decisions.append(CaptureDecision(index, True, "captured", category, text, detail))
                continue
        decisions.append(CaptureDecision(index, False, reason, None, text, detail))
    return decisions
