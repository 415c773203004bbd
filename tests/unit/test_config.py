from __future__ import annotations

import logging
from pathlib import Path

import pytest

from memoryd.config import load_settings
from memoryd.core.errors import ConfigError


def test_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MEMORYD_CONFIG", raising=False)
    s = load_settings()
    assert s.listen == "127.0.0.1:50051"
    assert s.store.max_chars == 10_000 and s.store.duplicate_threshold == 0.95
    assert s.recall.default_limit == 5 and s.recall.max_limit == 100
    assert s.auth_token is None
    assert s.storage_uri == str(s.data_dir / "lancedb")
    assert s.follow_interval == 0  # a local directory: this daemon is its only writer


def test_an_object_store_is_followed_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MEMORYD_CONFIG", raising=False)
    monkeypatch.setenv("MEMORYD_STORAGE__URI", "s3://bucket/memoryd")
    assert load_settings().follow_interval == 0.25
    monkeypatch.setenv("MEMORYD_STORAGE__FOLLOW_INTERVAL", "0")
    assert load_settings().follow_interval == 0
    monkeypatch.setenv("MEMORYD_STORAGE__URI", "/srv/shared/memoryd")  # e.g. a shared mount
    monkeypatch.setenv("MEMORYD_STORAGE__FOLLOW_INTERVAL", "0.5")
    assert load_settings().follow_interval == 0.5


def test_file_then_env_then_flags(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = tmp_path / "memoryd.toml"
    cfg.write_text(
        'listen = "127.0.0.1:6000"\n[store]\nmax_chars = 500\nduplicate_threshold = 0.9\n'
    )
    monkeypatch.setenv("MEMORYD_STORE__MAX_CHARS", "700")
    s = load_settings(cfg)
    assert (s.listen, s.store.max_chars, s.store.duplicate_threshold) == (
        "127.0.0.1:6000",
        700,
        0.9,
    )
    s = load_settings(cfg, {"listen": "0.0.0.0:7000", "data_dir": tmp_path})
    assert s.listen == "0.0.0.0:7000" and s.data_dir == tmp_path and s.store.max_chars == 700


def test_invalid_settings_name_the_field(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMORYD_STORE__MAX_CHARS", "0")
    with pytest.raises(ConfigError, match=r"store\.max_chars"):
        load_settings()
    monkeypatch.delenv("MEMORYD_STORE__MAX_CHARS")
    with pytest.raises(ConfigError, match="listen"):
        load_settings(None, {"listen": "nonsense"})
    bad = tmp_path / "bad.toml"
    bad.write_text("[store]\nmax_charz = 5\n")
    with pytest.raises(ConfigError, match=r"store\.max_charz"):
        load_settings(bad)


def test_forget_floors_are_checked_and_reach_the_service(monkeypatch: pytest.MonkeyPatch) -> None:
    from memoryd.server import limits_from

    monkeypatch.setenv("MEMORYD_FORGET__CANDIDATE_SCORE", "0.8")
    with pytest.raises(ConfigError, match=r"forget.*candidate_score \(0\.8\) must not exceed"):
        load_settings()
    monkeypatch.setenv("MEMORYD_FORGET__CANDIDATE_SCORE", "0.2")
    monkeypatch.setenv("MEMORYD_FORGET__MARGIN", "0.05")
    lim = limits_from(load_settings())
    assert (lim.forget_strong_score, lim.forget_candidate_score, lim.forget_margin) == (
        0.5,
        0.2,
        0.05,
    )


def test_token_only_from_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text('auth_token = "s3cret"\n')
    with pytest.raises(ConfigError, match="MEMORYD_AUTH_TOKEN"):
        load_settings(cfg)
    monkeypatch.setenv("MEMORYD_AUTH_TOKEN", "s3cret")
    s = load_settings()
    assert s.auth_token is not None and s.auth_token.get_secret_value() == "s3cret"
    assert "s3cret" not in repr(s)


def test_policy_settings_become_a_policy(tmp_path: Path) -> None:
    cfg = tmp_path / "p.toml"
    cfg.write_text(
        '[policy]\ndefault_read = ["agent:{agent_id}", "global", "workspace:t"]\n'
        '[policy.agents.ops]\nwrite = ["agent:{agent_id}", "global"]\n'
    )
    policy = load_settings(cfg).policy.to_policy()
    assert policy.access("ops").write == {"agent:ops", "global"}
    assert policy.access("dev").read == {"agent:dev", "global", "workspace:t"}


def test_recall_settings_become_the_pipeline_config(tmp_path: Path) -> None:
    config_file = tmp_path / "memoryd.toml"
    config_file.write_text('[recall]\nfusion = "rrf"\nann_threshold = 5000\nrerank_top = 7\n')
    settings = load_settings(config_file)
    config = settings.recall.to_config()  # index-only settings must not leak into it
    assert (config.fusion.value, config.rerank_top) == ("rrf", 7)
    assert settings.recall.ann_threshold == 5000


def test_the_readme_settings_file_loads_as_printed(tmp_path: Path) -> None:
    readme = (Path(__file__).parents[2] / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Configuration", 1)[1]
    example = section.split("```toml\n", 1)[1].split("```", 1)[0]
    cfg = tmp_path / "memoryd.toml"
    cfg.write_text(example.replace('"/var/lib/memoryd"', f'"{tmp_path}"'))
    s = load_settings(cfg)
    assert s.auth.keys_file is None and s.server.tls_client_ca is None
    assert s.server.insecure is False and s.auth.access_log is False
    assert s.policy.to_policy().access("ops").write == {"agent:ops", "global"}


def test_vault_settings_never_stop_the_daemon(monkeypatch: pytest.MonkeyPatch) -> None:
    """The vault is the CLI's business: a bad or unknown [vault] value must not keep memory
    from starting (memoryd vault doctor reports it)."""
    monkeypatch.setenv("MEMORYD_VAULT__ENABLED", "maybe")
    monkeypatch.setenv("MEMORYD_VAULT__AGNET", "main")
    s = load_settings()
    assert s.listen == "127.0.0.1:50051"


def test_the_retrieval_section_is_still_read_from_a_file_as_recall_with_a_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.delenv("MEMORYD_CONFIG", raising=False)
    old = tmp_path / "old.toml"
    old.write_text(
        '[storage]\ntable = "mine"\n[retrieval]\nrrf_k = 30\n[recall]\ndefault_limit = 7\n'
    )
    with caplog.at_level(logging.WARNING, logger="memoryd.config"):
        s = load_settings(old)
    assert (s.storage.table, s.recall.rrf_k, s.recall.default_limit) == ("mine", 30.0, 7)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "retrieval.rrf_k is now recall.rrf_k" in warnings[0]

    caplog.clear()
    new = tmp_path / "new.toml"
    new.write_text('[storage]\ntable = "mine"\n[recall]\nrrf_k = 30\ndefault_limit = 7\n')
    with caplog.at_level(logging.WARNING, logger="memoryd.config"):
        assert load_settings(new).model_dump() == s.model_dump()
    assert not caplog.records

    both = tmp_path / "both.toml"  # the new spelling wins over the old one
    both.write_text("[retrieval]\nrrf_k = 10\nbm25_scale = 3\n[recall]\nrrf_k = 20\n")
    s = load_settings(both)
    assert (s.recall.rrf_k, s.recall.bm25_scale) == (20.0, 3.0)


def test_the_retrieval_section_is_still_read_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.delenv("MEMORYD_CONFIG", raising=False)
    monkeypatch.setenv("MEMORYD_STORAGE__CACHE_MIB", "32")
    monkeypatch.setenv("MEMORYD_RETRIEVAL__FUSION", "rrf")
    with caplog.at_level(logging.WARNING, logger="memoryd.config"):
        s = load_settings()
    assert (s.storage.cache_mib, s.recall.fusion) == (32, "rrf")
    assert "MEMORYD_RETRIEVAL__FUSION is now MEMORYD_RECALL__FUSION" in caplog.text
    assert "STORAGE" not in caplog.text  # [storage] is a current name

    monkeypatch.setenv("MEMORYD_RECALL__FUSION", "bm25")  # the new spelling wins
    assert load_settings().recall.fusion == "bm25"
    monkeypatch.delenv("MEMORYD_RETRIEVAL__FUSION")
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="memoryd.config"):
        assert load_settings().recall.fusion == "bm25"
    assert not caplog.records


def test_an_unknown_key_stops_the_daemon_in_old_and_new_sections(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MEMORYD_CONFIG", raising=False)
    for section, named in (("storage", "storage"), ("retrieval", "recall")):
        bad = tmp_path / f"{section}.toml"
        bad.write_text(f"[{section}]\ntabel = 5\n")
        with pytest.raises(ConfigError, match=rf"setting {named}\.tabel: Extra inputs"):
            load_settings(bad)
    bad = tmp_path / "section.toml"
    bad.write_text("[retreival]\nfusion = 'rrf'\n")
    with pytest.raises(ConfigError, match=r"setting retreival: Extra inputs"):
        load_settings(bad)
    monkeypatch.setenv("MEMORYD_STORAGE__CACHE_MIB", "0")
    with pytest.raises(ConfigError, match=r"storage\.cache_mib"):
        load_settings()
