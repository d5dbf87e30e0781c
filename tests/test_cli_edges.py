"""Edges of the command line: every bad value is one line on stderr and exit status 2, never a
traceback, and a refused command creates nothing."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from gpuconsole.cli.main import main
from gpuconsole.core.money import budgets as rules
from gpuconsole.core.ops import manifests


def one_error_line(capsys: pytest.CaptureFixture[str]) -> str:
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("gpuconsole: error: "), captured.err
    assert "Traceback" not in captured.err
    return lines[0]


# --------------------------------------------------------------------------- sim-exporter --port


@pytest.mark.parametrize("port", ["99999", "65536", "-1", "many"])
def test_sim_exporter_port_out_of_range_is_one_line_naming_the_option(capsys, port) -> None:
    assert main(["sim-exporter", "--port", port]) == 2
    line = one_error_line(capsys)
    assert "argument --port:" in line
    if port != "many":
        assert f"must be from 0 to 65535, got {port}" in line


def test_sim_exporter_port_in_use_is_one_line(capsys) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["sim-exporter", "--port", str(port)]) == 2
    line = one_error_line(capsys)
    assert f"argument --port: cannot listen on 127.0.0.1:{port}" in line
    assert "in use" in line


# --------------------------------------------------------------------------- --demo-nodes


@pytest.mark.parametrize("prefix", [["snapshot"], ["sim-exporter"]], ids=["console", "sim-exporter"])
@pytest.mark.parametrize("nodes", ["0", "-5", "4097"])
def test_demo_nodes_has_one_rule_below_and_above(capsys, prefix, nodes) -> None:
    argv = ["--demo-nodes", nodes, *prefix] if prefix == ["snapshot"] else [*prefix, "--demo-nodes", nodes]
    assert main(argv) == 2
    line = one_error_line(capsys)
    assert f"argument --demo-nodes: must be from 1 to 4096 nodes, got {nodes}" in line


# --------------------------------------------------------------------------- audit export -o


def test_audit_export_refuses_a_missing_directory_and_creates_nothing(capsys, tmp_path: Path) -> None:
    target = tmp_path / "missing" / "dir" / "a.csv"
    assert main(["audit", "export", "--csv", "-o", str(target)]) == 2
    line = one_error_line(capsys)
    assert "argument --output/-o:" in line and str(tmp_path / "missing" / "dir") in line
    assert not (tmp_path / "missing").exists()


def test_audit_export_refuses_a_directory_or_a_file_as_its_directory(capsys, tmp_path: Path) -> None:
    assert main(["audit", "export", "--json", "-o", str(tmp_path)]) == 2
    assert "is a directory" in one_error_line(capsys)
    plain = tmp_path / "plain"
    plain.write_text("x")
    assert main(["audit", "export", "--json", "-o", str(plain / "a.json")]) == 2
    assert "is not a directory" in one_error_line(capsys)
    assert plain.read_text() == "x"


# --------------------------------------------------------------------------- budget add --scope


@pytest.mark.parametrize("scope", ["namespace:Bad NS", "namespace:UPPER", "namespace:-lead", "namespace:" + "a" * 64])
def test_budget_scope_takes_the_job_forms_namespace_rule(capsys, scope) -> None:
    assert main(["budget", "add", "x", "--amount", "5", "--scope", scope]) == 2
    line = one_error_line(capsys)
    assert f"argument --scope: bad budget scope {scope!r}: a namespace is a lowercase RFC 1123 label" in line


def test_a_good_namespace_scope_is_saved(capsys) -> None:
    assert main(["budget", "add", "research", "--amount", "5", "--scope", "namespace:team-nlp"]) == 0
    assert "research" in capsys.readouterr().out


@pytest.mark.parametrize("name", ["research", "team-nlp", "a", "a" * 63, "a" * 64, "Bad NS", "UPPER", "-x", "x-",
                                  "x_y", "x.y", "ns1", ""])
def test_budget_and_job_namespace_rules_agree(name) -> None:
    from gpuconsole.core.ops.manifests import JobRequest

    job = manifests.validate(JobRequest(name="j", namespace=name, image="busybox")).get("namespace")
    assert rules.namespace_problem(name) == job


# --------------------------------------------------------------------------- budget add --amount


@pytest.mark.parametrize("amount", ["1e309", "nan", "inf", "-inf", "1e20", "100000000.01", "0", "-5"])
def test_budget_amount_must_be_finite_and_sane(capsys, amount) -> None:
    assert main(["budget", "add", "x", f"--amount={amount}"]) == 2  # = : argparse reads "-inf" as an option
    line = one_error_line(capsys)
    assert "argument --amount: must be more than $0 and at most $100,000,000" in line


def test_the_largest_budget_amount_is_saved(capsys) -> None:
    assert main(["budget", "add", "big", "--amount", "$100,000,000"]) == 0
    assert main(["budget", "list", "--json"]) == 0
    assert '"amount": 100000000.0' in capsys.readouterr().out


def test_validate_holds_the_same_amount_rule() -> None:
    from gpuconsole.model import Budget

    for bad in (float("inf"), float("nan"), 1e20, 0.0):
        with pytest.raises(rules.BudgetError, match=r"at most \$100,000,000"):
            rules.validate(Budget(name="x", amount=bad))
    assert rules.validate(Budget(name="x", amount=rules.MAX_AMOUNT)).amount == rules.MAX_AMOUNT
