"""No import cycle among Sluice's modules, and the import layering of ``[tool.importlinter]`` (issue 15).

Two checks, both over the source tree of this checkout (``engine``, ``checkpoints`` and ``plugins/sluice``):

- the whole module graph, built by grimp, has no strongly connected component: every import counts,
  function-local ones included (a lazy import hides a cycle, it does not break it); only imports under
  ``if TYPE_CHECKING:`` are left out, since they never run.  A failure names each cycle with the line of
  every import in it.  import-linter's ``acyclic_siblings`` cannot say this for modules of different top
  packages (``engine`` <-> ``checkpoints``), so this walk is done here;
- ``lint-imports`` keeps every contract in ``pyproject.toml``: no cycle between the subpackages of any
  package below ``engine``, of ``checkpoints``, of ``sluice``; engine's subpackages layered (cli, master,
  api, runtime, graph, io, windowing, operators, ... errors) but for a listed set of upward imports that can
  only shrink; the API never imports a runtime; runtimes never import the API facade; windowing never
  imports a runtime.

Both run in a subprocess whose ``PYTHONPATH`` starts with this checkout, so they check these files even
where the installed (editable) package points at another tree.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("engine", "checkpoints", "sluice")


def find_cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """One cycle per strongly connected component of ``graph``, as lines ``a:LINE -> b  (the import)``.

    Tarjan's algorithm, iterative; each component is shown by its shortest cycle through its first module."""
    modules = sorted(graph.modules)
    successors = {m: sorted(graph.find_modules_directly_imported_by(m)) for m in modules}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []
    for root in modules:
        if root in index:
            continue
        work = [(root, 0)]
        while work:
            node, i = work.pop()
            if i == 0:
                index[node] = low[node] = len(index)
                stack.append(node)
                on_stack.add(node)
            if i < len(successors[node]):
                work.append((node, i + 1))
                nxt = successors[node][i]
                if nxt not in index:
                    work.append((nxt, 0))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1 or node in successors[node]:
                    components.append(sorted(component))
    cycles = []
    for component in sorted(components):
        first = component[0]
        inside = set(component)
        chains = [graph.find_shortest_chain(importer=n, imported=first) for n in successors[first] if n in inside]
        chain = (first, *min((c for c in chains if c), key=len))
        lines = []
        for importer, imported in zip(chain, chain[1:]):
            details = graph.get_import_details(importer=importer, imported=imported)
            where = ", ".join(f"{importer}:{d['line_number']} ({d['line_contents']})" for d in details) or importer
            lines.append(f"{where} -> {imported}")
        cycles.append(lines)
    return cycles


def _project_graph() -> grimp.ImportGraph:
    return grimp.build_graph(*PACKAGES, cache_dir=None, exclude_type_checking_imports=True)


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), str(ROOT / "plugins"), env.get("PYTHONPATH")) if p)
    return env


def test_the_cycle_finder_names_a_cycle_and_accepts_a_chain() -> None:
    graph = grimp.ImportGraph()
    for importer, imported, line in [("p.a", "p.b", 3), ("p.b", "p.c", 7), ("p.c", "p.a", 11), ("p.c", "p.d", 12)]:
        graph.add_import(importer=importer, imported=imported, line_number=line, line_contents=f"import {imported}")
    assert find_cycles(graph) == [["p.a:3 (import p.b) -> p.b", "p.b:7 (import p.c) -> p.c", "p.c:11 (import p.a) -> p.a"]]
    graph.remove_import(importer="p.c", imported="p.a")
    assert find_cycles(graph) == []


def test_no_module_imports_itself_back_through_others() -> None:
    done = subprocess.run([sys.executable, __file__], cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"import cycles among Sluice's modules:\n{done.stdout}{done.stderr}"
    assert "modules checked" in done.stdout  # the walk ran over the tree, not over nothing


def test_import_linter_contracts_are_kept() -> None:
    lint_imports = Path(sys.executable).with_name("lint-imports")
    done = subprocess.run([str(lint_imports), "--no-cache"], cwd=ROOT, env=_env(), capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, f"lint-imports (pyproject.toml [tool.importlinter]):\n{done.stdout}{done.stderr}"
    assert "0 broken" in done.stdout


if __name__ == "__main__":  # the subprocess of test_no_module_imports_itself_back_through_others
    graph = _project_graph()
    for package in PACKAGES:  # the tree checked is this checkout's
        origin = Path(sys.modules[package].__file__ if package in sys.modules else __import__(package).__file__)
        if ROOT not in origin.parents:
            sys.exit(f"{package} resolves to {origin}, outside {ROOT}")
    found = find_cycles(graph)
    for number, cycle in enumerate(found, 1):
        print(f"cycle {number}:")
        for line in cycle:
            print(f"    {line}")
    print(f"{len(graph.modules)} modules checked, {len(found)} cycles")
    sys.exit(1 if found else 0)
