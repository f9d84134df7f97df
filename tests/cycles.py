"""Import cycles among a package's modules, counting the imports inside functions (used by tests/project/test_no_cycles.py)."""
import ast, pathlib, sys

def graph(root: pathlib.Path):
    mods = {}
    for p in root.rglob("*.py"):
        rel = p.relative_to(root.parent).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__": parts = parts[:-1]
        mods[".".join(parts)] = p
    edges = {m: set() for m in mods}
    for m, p in mods.items():
        tree = ast.parse(p.read_text())
        type_checking = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
                for sub in ast.walk(node): type_checking.add(id(sub))
        for node in ast.walk(tree):
            if id(node) in type_checking: continue
            targets = []
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and node.module.split(".")[0] == root.name:
                for a in node.names:
                    full = f"{node.module}.{a.name}"
                    targets.append(full if full in mods else node.module)
            elif isinstance(node, ast.Import):
                targets += [a.name for a in node.names if a.name.split(".")[0] == root.name]
            for t in targets:
                if t in mods and t != m: edges[m].add(t)
    return edges

def cycles(edges):
    index, low, stack, on, out, n = {}, {}, [], set(), [], [0]
    sys.setrecursionlimit(10000)
    def visit(v):
        index[v] = low[v] = n[0]; n[0] += 1; stack.append(v); on.add(v)
        for w in edges[v]:
            if w not in index: visit(w); low[v] = min(low[v], low[w])
            elif w in on: low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop(); on.discard(w); comp.append(w)
                if w == v: break
            if len(comp) > 1: out.append(sorted(comp))
    for v in edges:
        if v not in index: visit(v)
    return out

if __name__ == "__main__":
    e = graph(pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "eaglekit"))
    for c in cycles(e): print(c)
