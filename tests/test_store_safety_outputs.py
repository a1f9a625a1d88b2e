"""The fault matrix, continued for output paths: -o writes regular files only (a FIFO, a device, a socket,
/dev/stdout are refused at once, never waited on), follows a symbolic link instead of replacing it, judges a text
file by what it holds (notes are not a CSV file), and names a "folder" that is a file.

Every case runs the real command line under a timeout, so a path that would block fails the case instead of
hanging the suite.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest

from test_store_safety import table_hashes
from test_store_safety_allowlist import calc_store, calc_store_once  # noqa: F401 (fixtures)


def cli(*args, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "coevolve_engine.cli", *map(str, args)], capture_output=True,
                          text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def refused(result: subprocess.CompletedProcess, words: str) -> None:
    assert result.returncode == 1, (result.returncode, result.stderr)
    assert words in result.stderr and "Traceback" not in result.stderr, result.stderr


@pytest.mark.parametrize("force", [[], ["--force"]], ids=["plain", "force"])
def test_an_output_onto_a_fifo_is_refused_without_waiting(calc_store, tmp_path, force):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    before = table_hashes(calc_store)
    for command in (["query", "select 1 as a", "--write"], ["query", "select 1 as a"], ["report"]):
        refused(cli(*command, "-o", fifo, *force, "--db", calc_store, timeout=60), "is a FIFO (named pipe)")
    assert fifo.is_fifo() and table_hashes(calc_store) == before


def test_an_output_onto_a_socket_is_refused(calc_store, tmp_path):
    path = tmp_path / "s.sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    try:
        refused(cli("query", "select 1 as a", "-o", path, "--db", calc_store), "is a socket")
    finally:
        server.close()


# (/dev/null itself is not tried: a build with the defect, run as root, would replace the machine's /dev/null; the
# device node case below makes its own node)
@pytest.mark.parametrize("target", ["/dev/stdout", "/dev/fd/1", "/proc/self/fd/1"])
def test_an_output_onto_a_device_or_standard_output_is_refused(calc_store, target):
    for force in ([], ["--force"]):
        result = cli("query", "select 1 as a", "--format", "csv", "-o", target, *force, "--db", calc_store)
        refused(result, f"{target} is a")
        assert "leave the output option out to print to standard output" in result.stderr
        assert result.stdout == ""


def test_a_character_device_node_is_never_replaced(calc_store, tmp_path):
    if os.geteuid() != 0:
        pytest.skip("making a device node needs root")
    node = tmp_path / "null"
    os.mknod(node, 0o666 | 0o020000, os.makedev(1, 3))
    refused(cli("query", "select 1 as a", "-o", node, "--db", calc_store), "is a character device")
    assert node.is_char_device()


def test_an_output_through_a_symbolic_link_writes_the_file_it_points_to_and_keeps_the_link(calc_store, tmp_path):
    real = tmp_path / "real.csv"
    real.write_text("a,b\n0,0\n")
    link = tmp_path / "link.csv"
    link.symlink_to(real.name)
    result = cli("query", "select 1 as a, 2 as b", "--format", "csv", "-o", link, "--db", calc_store)
    assert result.returncode == 0, result.stderr
    assert link.is_symlink() and os.readlink(link) == "real.csv" and real.read_text() == "a,b\n1,2\n"
    notes = tmp_path / "notes.txt"
    notes.write_text("my notes\n")
    (tmp_path / "to-notes.csv").symlink_to(notes)
    refused(cli("query", "select 1 as a, 2 as b", "--format", "csv", "-o", tmp_path / "to-notes.csv", "--db",
                calc_store), "exists and is not a CSV file")
    assert notes.read_text() == "my notes\n"


@pytest.mark.parametrize("name", ["notes.txt", "NOTES", "todo.log"])
@pytest.mark.parametrize("format_", ["csv", "table"])
def test_notes_in_a_text_file_are_not_replaced_by_a_result_without_force(calc_store, tmp_path, name, format_):
    notes = tmp_path / name
    notes.write_text("buy milk\ncall the lab about the cluster\n")
    result = cli("query", "select 1 as a, 2 as b", "--format", format_, "-o", notes, "--db", calc_store)
    refused(result, "it looks like plain text")
    assert notes.read_text() == "buy milk\ncall the lab about the cluster\n"
    assert cli("query", "select 1 as a", "--format", format_, "-o", notes, "--force", "--db",
               calc_store).returncode == 0


@pytest.mark.parametrize("format_, sql", [("csv", "select 1 as a, 2 as b"), ("csv", "select 1 as n"),
                                          ("table", "select 1 as a")])
def test_the_same_command_can_write_its_output_again(calc_store, tmp_path, format_, sql):
    for name in ("out.txt", "out"):
        for _ in range(2):
            result = cli("query", sql, "--format", format_, "-o", tmp_path / name, "--db", calc_store)
            assert result.returncode == 0, (name, result.stderr)


def test_an_output_under_a_file_names_the_file(calc_store, tmp_path):
    same = tmp_path / "same.csv"
    same.write_text("a,b\n1,2\n")
    for target in (same / "x.csv", same / "deeper" / "x.csv"):
        refused(cli("query", "select 1 as a", "-o", target, "--db", calc_store),
                f"cannot write {target}: {same} is a file, not a folder")
    assert same.read_text() == "a,b\n1,2\n"
