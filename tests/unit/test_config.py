from __future__ import annotations

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


def test_retrieval_settings_become_the_pipeline_config(tmp_path: Path) -> None:
    config_file = tmp_path / "memoryd.toml"
    config_file.write_text('[retrieval]\nfusion = "rrf"\nann_threshold = 5000\nrerank_top = 7\n')
    settings = load_settings(config_file)
    config = settings.retrieval.to_config()  # index-only settings must not leak into it
    assert (config.fusion.value, config.rerank_top) == ("rrf", 7)
    assert settings.retrieval.ann_threshold == 5000


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
