from memoryd.core.text import content_hash, normalize_text


def test_normalisation_makes_equivalent_texts_equal() -> None:
    a = normalize_text("  Cafe\u0301 menu\r\nline two  \r\n")
    b = normalize_text("Caf\u00e9 menu\nline two")
    assert a == b == "Caf\u00e9 menu\nline two"
    assert content_hash(a) == content_hash(b)


def test_different_texts_hash_differently() -> None:
    assert content_hash("a") != content_hash("b")
    assert normalize_text(" \n\t ") == ""
