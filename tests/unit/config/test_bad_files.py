"""Issue 11, files: only regular files are read, never more than a fixed number of bytes.

Every reader of a path a person names (config files, ``--data`` text, a checkpoint folder's
config.json, its safetensors index and its shards) meets each kind of special file: a FIFO (which
would block a plain ``open`` forever), a folder, a symlink loop, a dangling symlink, a socket, a
character device (/dev/zero, /dev/urandom) and huge regular files (sparse, so they take no
disk). Each must be refused at once with the reader's error naming the path and what it is.
A SIGALRM guard turns a blocking read into a failure instead of a hung test run.
"""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from llama_lab.cli import main
from llama_lab.config import PRESETS, ConfigError, load_config_file, read_bounded
from llama_lab.config.files import MAX_CONFIG_BYTES, check_path, load_json_file
from llama_lab.errors import DataError
from llama_lab.model import build_model, load_checkpoint
from llama_lab.train import data

pytestmark = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs POSIX special files")

CFG = PRESETS["debug"].replace(norm_eps=1e-5)
ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def no_blocking():
    """Fail (instead of hanging) if anything blocks for 10 s."""

    def expire(signum, frame):
        raise TimeoutError("a reader blocked on a special file")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(10)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


def _special(folder: Path, kind: str) -> Path:
    """A path of ``kind`` in ``folder``, with the substring its refusal must contain."""
    path = folder / f"{kind}.json"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "folder":
        path.mkdir()
    elif kind == "symlink-loop":
        os.symlink(folder / "loop-b", path)
        os.symlink(path, folder / "loop-b")
    elif kind == "dangling-symlink":
        os.symlink(folder / "nowhere", path)
    elif kind == "symlink-to-fifo":
        os.mkfifo(folder / "target-fifo")
        os.symlink(folder / "target-fifo", path)
    elif kind == "socket":
        server = socket.socket(socket.AF_UNIX)
        server.bind(str(path))
        _SOCKETS.append(server)
    elif kind in ("dev-zero", "dev-urandom"):
        return Path("/dev/" + kind.split("-")[1])
    elif kind == "missing":
        pass
    return path


_SOCKETS: list = []
SPECIALS = {
    "fifo": "is a FIFO, not a regular file",
    "symlink-to-fifo": "is a FIFO, not a regular file",
    "folder": "is a folder, not a regular file",
    "symlink-loop": "is a symlink loop, not a regular file",
    "dangling-symlink": "is a symlink to a missing target",
    "socket": "is a socket, not a regular file",
    "dev-zero": "is a character device, not a regular file",
    "dev-urandom": "is a character device, not a regular file",
    "missing": "does not exist",
}


@pytest.fixture
def short_tmp():
    """A short folder (a socket path must stay under ~100 characters)."""
    folder = Path(tempfile.mkdtemp(prefix="lab", dir="/tmp"))
    yield folder
    while _SOCKETS:
        _SOCKETS.pop().close()
    shutil.rmtree(folder)


READERS = {
    "read_bounded": (lambda p: read_bounded(p, 1000, "file"), ConfigError),
    "load_config_file": (load_config_file, ConfigError),
    "load_json_file": (lambda p: load_json_file(p, 1000, "index"), ConfigError),
    "load_text_file": (lambda p: data.load_text_file(p, what="--data"), DataError),
}


@pytest.mark.parametrize("kind", sorted(SPECIALS))
@pytest.mark.parametrize("reader", sorted(READERS))
def test_every_reader_refuses_special_files_at_once(short_tmp, no_blocking, reader, kind):
    path = _special(short_tmp, kind)
    read, error = READERS[reader]
    start = time.monotonic()
    with pytest.raises(error) as info:
        read(path)
    assert time.monotonic() - start < 2
    message = str(info.value)
    assert SPECIALS[kind] in message and str(path)[:40] in message, message


@pytest.mark.parametrize("kind", ["fifo", "socket", "dev-zero", "symlink-loop", "missing"])
def test_checkpoint_folder_itself_must_be_a_folder(short_tmp, no_blocking, kind):
    path = _special(short_tmp, kind)
    with pytest.raises(ConfigError, match="not a folder|symlink loop|does not exist"):
        load_checkpoint(path)
    if kind != "missing" and kind != "symlink-loop":
        with pytest.raises(ConfigError, match=r"is a \w+( \w+)?, not a folder"):
            check_path(path, "checkpoint folder", folder=True)


def _sparse(path: Path, size: int) -> Path:
    """A regular file of ``size`` bytes that takes no disk (a hole)."""
    with open(path, "wb") as handle:
        handle.truncate(size)
    return path


def test_huge_regular_files_are_refused_by_size_without_reading(tmp_path, no_blocking):
    big = _sparse(tmp_path / "big.json", 10 * 2**30)  # 10 GiB, all hole
    start = time.monotonic()
    with pytest.raises(
        ConfigError, match="is 10,737,418,240 bytes, larger than the limit of 1,000,000 bytes"
    ):
        load_config_file(big)
    with pytest.raises(DataError, match="larger than the limit of 20,000,000 bytes"):
        data.load_text_file(big)
    assert time.monotonic() - start < 1
    at_limit = _sparse(tmp_path / "limit.json", MAX_CONFIG_BYTES + 1)
    with pytest.raises(ConfigError, match="larger than the limit"):
        load_config_file(at_limit)


@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="needs /proc")
def test_a_file_that_reads_longer_than_its_stat_size_is_still_bounded():
    assert os.stat("/proc/self/maps").st_size == 0  # stat says empty ...
    with pytest.raises(ConfigError, match="larger than the limit of 100 bytes"):
        read_bounded("/proc/self/maps", 100, "file")  # ... the read stops at 101


def test_regular_files_still_read(tmp_path):
    path = tmp_path / "cfg.json"
    path.write_text(json.dumps(CFG.to_dict()))
    assert load_config_file(path)[0] == CFG
    link = tmp_path / "link.json"
    os.symlink(path, link)  # a symlink to a file is fine
    assert load_config_file(link)[0] == CFG
    bom = tmp_path / "bom.json"
    bom.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())  # Windows editors add a BOM
    assert load_config_file(bom)[0] == CFG
    assert read_bounded(path, 10**6, "file") == path.read_bytes()


def test_config_file_that_is_not_utf8(tmp_path, capsys):
    latin = tmp_path / "latin.json"
    latin.write_bytes('{"d_model": "café"}'.encode("latin-1"))
    assert main(["analyze", "--config", str(latin)]) == 2
    err = capsys.readouterr().err
    assert "is not UTF-8 text: byte 0xe9 at offset 16" in err and len(err.strip().splitlines()) == 1


@pytest.mark.slow
@pytest.mark.parametrize(
    "argv_of,needle",
    [
        (lambda p: ["analyze", "--config", str(p / "fifo.json")], "is a FIFO, not a regular file"),
        (lambda p: ["train", "--preset", "debug", "--data", str(p / "fifo.json")], "is a FIFO"),
        (lambda p: ["analyze", "--config", str(p / "loop.json")], "is a symlink loop"),
        (lambda p: ["analyze", "--config", "/dev/urandom"], "is a character device"),
    ],
    ids=["config-fifo", "data-fifo", "config-symlink-loop", "config-urandom"],
)
def test_cli_refuses_special_files_in_seconds(short_tmp, argv_of, needle):
    os.mkfifo(short_tmp / "fifo.json")
    os.symlink(short_tmp / "loop.json", short_tmp / "loop.json")
    proc = subprocess.run(
        [sys.executable, "-m", "llama_lab", *argv_of(short_tmp)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and proc.stdout == "", proc.stderr
    assert len(lines) == 1 and lines[0].startswith("error:") and needle in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize("kind", ["fifo", "folder", "symlink-loop", "dev-zero", "missing"])
def test_cli_in_process_one_line_per_special_config(short_tmp, no_blocking, capsys, kind):
    path = _special(short_tmp, kind)
    assert main(["analyze", "--config", str(path)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.strip().splitlines()) == 1 and SPECIALS[kind] in err, err


# ---- checkpoint folders: their config.json, index and shards ------------------------------------


def _checkpoint(folder: Path) -> Path:
    from safetensors.torch import save_file

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(CFG.to_hf_config()))
    save_file(
        {k: v.contiguous() for k, v in build_model(CFG).state_dict().items()},
        str(folder / "model.safetensors"),
    )
    return folder


def _replace(path: Path, kind: str) -> None:
    path.unlink()
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "folder":
        path.mkdir()
    elif kind == "symlink-loop":
        os.symlink(path, path)
    elif kind == "dev-zero":
        os.symlink("/dev/zero", path)
    elif kind == "oversized":
        _sparse(path, 64_000_000)


@pytest.mark.parametrize(
    "member,kind,needle",
    [
        ("config.json", "fifo", "config.json' is a FIFO, not a regular file"),
        ("config.json", "folder", "config.json' is a folder, not a regular file"),
        ("config.json", "symlink-loop", "config.json' is a symlink loop"),
        ("config.json", "dev-zero", "config.json' is a character device"),
        ("config.json", "oversized", "larger than the limit of 1,000,000 bytes"),
        ("model.safetensors.index.json", "fifo", "index.json' is a FIFO, not a regular file"),
        ("model.safetensors.index.json", "symlink-loop", "index.json' is a symlink loop"),
        ("model.safetensors.index.json", "oversized", "larger than the limit of 32,000,000 bytes"),
        ("model.safetensors", "fifo", "model.safetensors' is a FIFO, not a regular file"),
        ("model.safetensors", "folder", "model.safetensors' is a folder, not a regular file"),
        ("model.safetensors", "dev-zero", "model.safetensors' is a character device"),
    ],
)
def test_checkpoint_members_that_are_not_regular_files(tmp_path, no_blocking, member, kind, needle):
    folder = _checkpoint(tmp_path / "ckpt")
    if member.endswith("index.json"):
        (folder / member).write_text(json.dumps({"weight_map": {"x": "model.safetensors"}}))
    _replace(folder / member, kind)
    with pytest.raises(ConfigError) as info:
        load_checkpoint(folder)
    assert needle in str(info.value), info.value


@pytest.mark.parametrize(
    "index,needle",
    [
        ('{"weight_map": ["model.safetensors"]}', "needs a 'weight_map'"),
        ('{"weight_map": {"a": ["model.safetensors"]}}', "needs a 'weight_map'"),
        ('{"weight_map": {"a": 7}}', "needs a 'weight_map'"),
        ('["weight_map"]', "needs a 'weight_map'"),
        ('{"weight_map": {"a": NaN}}', "a=NaN is not a finite number"),
        ('{"weight_map": {"a": "model.safetensors", "a": "x.safetensors"}}', "'a' appears twice"),
        ('{"weight_map": {"a": "\\ud800.safetensors"}}', "lone surrogate"),
        ('{"weight_map": {"a": "sub/x.safetensors"}}', "in the same folder"),
        (
            '{"weight_map": {"a": "missing.safetensors"}}',
            "shard missing.safetensors named by the index is missing",
        ),
        ("[" * 50_000, "nested too deeply"),
        ("", "is empty"),
        ('{"weight_map": {}}', "holds no .safetensors weights"),
    ],
)
def test_checkpoint_index_contents(tmp_path, index, needle):
    folder = _checkpoint(tmp_path / "ckpt")
    (folder / "model.safetensors.index.json").write_text(index)
    with pytest.raises(ConfigError) as info:
        load_checkpoint(folder)
    assert needle in str(info.value), info.value


def test_checkpoint_folders_bad_input(tmp_path):
    cases = []
    cases.append((tmp_path / "nothing", "does not exist"))
    no_config = tmp_path / "no_config"
    no_config.mkdir()
    cases.append((no_config, "has no config.json"))
    truncated = _checkpoint(tmp_path / "truncated")
    blob = (truncated / "model.safetensors").read_bytes()
    (truncated / "model.safetensors").write_bytes(blob[: len(blob) // 2])
    cases.append((truncated, "not a readable safetensors file"))
    bad_index = _checkpoint(tmp_path / "bad_index")
    (bad_index / "model.safetensors.index.json").write_text('{"weight_map": {"a": "../../etc/passwd"}}')
    cases.append((bad_index, "must be .safetensors files in the same folder"))
    pickle_only = tmp_path / "pickle_only"
    pickle_only.mkdir()
    (pickle_only / "config.json").write_text(json.dumps(CFG.to_hf_config()))
    (pickle_only / "pytorch_model.bin").write_bytes(b"\x80\x04")
    cases.append((pickle_only, "pickle checkpoints are never loaded"))
    bad_config = _checkpoint(tmp_path / "bad_config")
    (bad_config / "config.json").write_text("{oops")
    cases.append((bad_config, "not valid JSON"))
    for folder, needle in cases:
        with pytest.raises(ConfigError) as info:
            load_checkpoint(folder)
        assert needle in str(info.value), (folder, info.value)


def test_checkpoint_too_big_for_memory_is_refused_before_reading(tmp_path, monkeypatch):
    from llama_lab.runtime import memory

    folder = _checkpoint(tmp_path / "ok")
    monkeypatch.setattr(memory, "free_memory_bytes", lambda device: 1_000)
    with pytest.raises(ValueError, match="loading ok needs about .* but only .* is free"):
        load_checkpoint(folder)
