"""No product module over 450 lines: a big module is split along its seams."""

from __future__ import annotations

from pathlib import Path

import gpuconsole

LIMIT = 450
PACKAGE = Path(gpuconsole.__file__).parent


def modules_over(limit: int, root: Path = PACKAGE) -> list[tuple[str, int]]:
    """``(path under the package's parent, line count)`` of every module over ``limit`` lines."""
    found = []
    for path in sorted(root.rglob("*.py")):
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if lines > limit:
            found.append((path.relative_to(root.parent).as_posix(), lines))
    return found


def test_no_product_module_is_over_the_limit() -> None:
    big = modules_over(LIMIT)
    assert not big, f"modules over {LIMIT} lines: " + ", ".join(f"{path} ({lines})" for path, lines in big)


def test_the_check_names_a_big_module_with_its_line_count(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "small.py").write_text("x = 1\n" * LIMIT)
    (package / "sub" / "big.py").write_text("x = 1\n" * (LIMIT + 1))
    assert modules_over(LIMIT, package) == [("pkg/sub/big.py", LIMIT + 1)]
