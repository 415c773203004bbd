"""The language model's scores computed by memoryd's kernel are the library's own."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from memoryd.core import language

# Sentences in the languages memoryd analyses (and a few it meets): Latin, Cyrillic,
# Arabic, Greek and Devanagari scripts, short chat lines, mixed scripts, upper case,
# digits and punctuation only, the empty text, text that is not normalised (NFD).
SENTENCES = [
    "What did Caroline research for her adoption plans last year?",
    "The user prefers dark mode in every editor",
    "Der Nutzer bevorzugt den dunklen Modus in jedem Editor",
    "Was habe ich letzte Woche über das Budget gesagt?",
    "El usuario prefiere el modo oscuro en todos los editores",
    "¿Qué decidimos ayer sobre el presupuesto?",
    "L'utilisateur préfère le mode sombre dans chaque éditeur",
    "L'utente preferisce la modalità scura in ogni editor",
    "O usuário prefere o modo escuro em todos os editores",
    "De gebruiker geeft de voorkeur aan de donkere modus",
    "Användaren föredrar mörkt läge i varje redigerare",
    "Użytkownik woli tryb ciemny w każdym edytorze",
    "Uživatel dává přednost tmavému režimu v každém editoru",
    "Kullanıcı her düzenleyicide karanlık modu tercih ediyor",
    "Người dùng thích chế độ tối trong mọi trình soạn thảo",
    "Pengguna lebih suka mode gelap di setiap editor",
    "Пользователь предпочитает тёмную тему во всех редакторах",
    "Користувач віддає перевагу темній темі в кожному редакторі",
    "يفضل المستخدم الوضع الداكن في كل محرر",
    "کاربر حالت تاریک را در هر ویرایشگری ترجیح می‌دهد",
    "Ο χρήστης προτιμά τη σκοτεινή λειτουργία",
    "उपयोगकर्ता हर संपादक में डार्क मोड पसंद करता है",
    "Jon: Bye!",
    "Gina: ;)",
    "OK",
    "THE MEETING IS AT NOON ON FRIDAY",
    "2023-05-08 14:00 #42 !!!",
    "",
    "Caf\u0065\u0301 au lait, s'il vous pla\u0131\u0302t",
    "Meeting with Jörg about the 東京 trip and the Москва office",
]


@pytest.mark.parametrize("text", SENTENCES)
def test_the_kernel_picks_the_librarys_language_with_its_confidence(text: str) -> None:
    ident = language._model()
    assert language._tables is not None  # py3langid 0.4's tables were taken
    want_language, want_confidence = ident.classify(text)
    got_language, got_confidence = language._classify(text)
    assert got_language == want_language
    assert got_confidence == pytest.approx(want_confidence, rel=1e-5, abs=1e-6)


def test_without_the_tables_the_library_answers() -> None:
    # a py3langid whose fields are not 0.4's leaves the tables out; detection still works
    saved = language._tables
    try:
        language._tables = None
        assert language.detect("Der Nutzer bevorzugt den dunklen Modus in jedem Editor") == "de"
    finally:
        language._tables = saved


def test_tables_that_would_walk_outside_themselves_are_refused() -> None:
    ident = language._model()
    good = language._tables
    assert good is not None

    class Broken:
        nb_ptc = ident.nb_ptc
        nb_pc = ident.nb_pc
        nb_classes = ident.nb_classes
        _norm_probs = True
        _rowbase = ident._rowbase
        tk_output = ident.tk_output
        tk_nextmove = good.nextmove.copy()

    assert language._Tables.of(Broken()) is not None  # the same tables pass
    Broken.tk_nextmove[7] = len(ident._rowbase)  # a state that does not exist
    assert language._Tables.of(Broken()) is None
    Broken.tk_nextmove = good.nextmove
    Broken.tk_output = [*ident.tk_output[:-1], ident.nb_ptc.shape[0]]  # a feature past the table
    assert language._Tables.of(Broken()) is None


def test_tables_with_numbers_past_their_types_are_refused_not_raised() -> None:
    # a start of row so large that adding to it overflows, a feature past int32, a state
    # that is negative: each leaves the library's own classify in place (None), not an
    # error on every detect
    ident = language._model()
    good = language._tables
    assert good is not None

    def odd(rowbase: list[int], output: list[int], nextmove: object) -> SimpleNamespace:
        return SimpleNamespace(
            nb_ptc=ident.nb_ptc,
            nb_pc=ident.nb_pc,
            nb_classes=ident.nb_classes,
            _norm_probs=True,
            _rowbase=rowbase,
            tk_output=output,
            tk_nextmove=nextmove,
        )

    one_state = np.zeros(256, dtype=np.uint32)  # every byte leads back to state 0
    assert language._Tables.of(odd([0], [-1], one_state)) is not None
    assert language._Tables.of(odd([2**63 - 1], [-1], one_state)) is None
    assert language._Tables.of(odd([0], [2**31], one_state)) is None
    assert language._Tables.of(odd([0], [-1], [-1] * 256)) is None
