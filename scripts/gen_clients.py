"""Stubs of the Go, Rust and Java clients, generated from protos/ (used by gen_proto.py).

Every generator is pinned; the tools are built or fetched once from their registries into a
cache outside the repo ($MEMORYD_DEV_CACHE, default ~/.cache/memoryd-dev):

- Go: protoc (grpcio-tools' bundled libprotoc, pinned in pyproject.toml) with
  protoc-gen-go and protoc-gen-go-grpc, `go install`ed at the versions below.
- Rust: protoc writes a FileDescriptorSet; clients/rust/codegen (tonic-prost-build, pinned
  in its Cargo.toml) turns it into prost messages and tonic clients. The descriptor set is
  committed beside them (the conformance tests read message types from it).
- Java: Maven's protobuf-maven-plugin with the protoc and protoc-gen-grpc-java artifacts
  from Maven Central (pinned in clients/java/pom.xml, profile `generate`).

Each builder writes its target's tree under ``out`` (mirroring the repo) and returns the
target directory in the repo.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROTOS = ROOT / "protos"
CACHE = Path(
    os.environ.get("MEMORYD_DEV_CACHE")
    or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "memoryd-dev"
)
GO_MODULE = "github.com/memoryd/memoryd/clients/go"
GO_PLUGINS = {
    "protoc-gen-go": "google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.10",
    "protoc-gen-go-grpc": "google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.5.1",
}


def _run(args: list[str], env: dict[str, str] | None = None) -> None:
    """Run a tool quietly; on failure show what it printed and stop."""
    result = subprocess.run(args, env=env, capture_output=True, text=True)
    if result.returncode != 0:
        sys.stderr.write(result.stdout + result.stderr)
        sys.exit(f"failed ({result.returncode}): {' '.join(args)}")


def _need(tool: str) -> str:
    path = shutil.which(tool)
    if path is None:
        sys.exit(f"{tool} not found on PATH: the {tool} toolchain is needed to generate stubs")
    return path


def _protoc(args: list[str]) -> None:
    import grpc_tools
    from grpc_tools import protoc

    well_known = Path(grpc_tools.__file__).parent / "_proto"
    files = sorted(str(p.relative_to(PROTOS)) for p in PROTOS.rglob("*.proto"))
    if protoc.main(["protoc", f"-I{PROTOS}", f"-I{well_known}", *args, *files]) != 0:
        sys.exit("protoc failed")


def go_plugin(name: str) -> Path:
    """The pinned Go plugin, `go install`ed into the cache the first time."""
    spec = GO_PLUGINS[name]
    bindir = CACHE / "go-plugins" / spec.replace("/", "_").replace("@", "-")
    exe = bindir / name
    if not exe.exists():
        env = {**os.environ, "GOBIN": str(bindir)}
        _run([_need("go"), "install", spec], env=env)
    return exe


def build_go(out: Path, work: Path) -> Path:
    target = ROOT / "clients" / "go" / "memorydv1"
    dest = out / "clients" / "go"
    dest.mkdir(parents=True)
    _protoc(
        [
            f"--plugin=protoc-gen-go={go_plugin('protoc-gen-go')}",
            f"--plugin=protoc-gen-go-grpc={go_plugin('protoc-gen-go-grpc')}",
            f"--go_out={dest}",
            f"--go_opt=module={GO_MODULE}",
            f"--go-grpc_out={dest}",
            f"--go-grpc_opt=module={GO_MODULE}",
        ]
    )
    return target


def build_rust(out: Path, work: Path) -> Path:
    target = ROOT / "clients" / "rust" / "src" / "gen"
    dest = out / target.relative_to(ROOT)
    dest.mkdir(parents=True)
    work.mkdir(parents=True)
    with_docs = work / "with-docs.binpb"
    _protoc([f"--descriptor_set_out={with_docs}", "--include_imports", "--include_source_info"])
    _protoc([f"--descriptor_set_out={dest / 'descriptor.binpb'}", "--include_imports"])
    manifest = ROOT / "clients" / "rust" / "codegen" / "Cargo.toml"
    env = {**os.environ}
    # one per checkout, as ./dev's (cargo judges freshness by file times)
    checkout = hashlib.sha256(str(ROOT).encode()).hexdigest()[:16]
    env.setdefault("CARGO_TARGET_DIR", str(CACHE / "cargo-target" / checkout))
    cargo = [_need("cargo"), "run", "--quiet", "--locked", "--manifest-path", str(manifest)]
    _run([*cargo, "--", str(with_docs), str(dest)], env=env)
    return target


def build_java(out: Path, work: Path) -> Path:
    target = ROOT / "clients" / "java" / "src" / "gen" / "java"
    dest = out / target.relative_to(ROOT)
    dest.mkdir(parents=True)
    pom = ROOT / "clients" / "java" / "pom.xml"
    mvn = [_need("mvn"), "--batch-mode", "--quiet", "-Dstyle.color=never", "-f", str(pom)]
    _run([*mvn, "-Pgenerate", f"-Dgen.out={dest}", "generate-sources"])
    return target


BUILDERS: dict[str, Callable[[Path, Path], Path]] = {
    "go": build_go,
    "rust": build_rust,
    "java": build_java,
}
