#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""The sources' layout, checked: no file of src/ (libringk, the UCT plugin, the core they share,
the tools) over MAX_LINES lines, no function over MAX_FUNC lines, and an include graph without
cycles in which the network layer (src/ringk/net/) is reached from the runtime only through
net/ringk_net.h and includes nothing of the runtime but ringk_internal.h, and the device
executor (src/ringk/dev/) only through dev/ringk_dev.h, including nothing of the runtime but
ringk_internal.h and ringk_exec.h. Prints TAP; with
--graph, prints the include graph (local includes) instead.

    layout.py SRCDIR [--graph]
"""
import os
import re
import sys

MAX_LINES = 800
MAX_FUNC = 80
NET_MAY_INCLUDE = {'src/ringk/ringk_internal.h'}   # the runtime's types and upcalls
# the device executor: the runtime's types and upcalls, and the executor interface it implements
DEV_MAY_INCLUDE = {'src/ringk/ringk_internal.h', 'src/ringk/ringk_exec.h'}


def files(top):
    out = []
    for d, _, names in sorted(os.walk(os.path.join(top, 'src'))):
        for f in sorted(names):
            if f.endswith(('.c', '.h')):
                out.append(os.path.relpath(os.path.join(d, f), top))
    return out


def includes(top, path):
    """The local headers @path includes, as paths relative to @top."""
    out = []
    here = os.path.dirname(path)
    for line in open(os.path.join(top, path)):
        m = re.match(r'\s*#\s*include\s+"([^"]+)"', line)
        if not m:
            continue
        for base in (here, 'src'):
            cand = os.path.normpath(os.path.join(base, m.group(1)))
            if os.path.exists(os.path.join(top, cand)):
                out.append(cand)
                break
    return out


def long_functions(top, path):
    """(name, first line, lines) of each function of @path longer than MAX_FUNC lines."""
    out, start, name = [], None, None
    for no, line in enumerate(open(os.path.join(top, path)), 1):
        if start is None and re.match(r'[A-Za-z_].*\(', line) and not line.rstrip().endswith(';'):
            start, name = no, line.strip()
        elif start is not None and line.startswith('}'):
            if no - start + 1 > MAX_FUNC:
                out.append((name[:60], start, no - start + 1))
            start = None
        elif start is not None and re.match(r'[A-Za-z_].*;\s*$', line) and no == start:
            start = None
    return out


def cycle(graph):
    """A cycle of @graph as a list of nodes, or None."""
    state = {}

    def visit(n, stack):
        state[n] = 1
        stack.append(n)
        for m in graph.get(n, ()):
            if state.get(m) == 1:
                return stack[stack.index(m):] + [m]
            if m not in state:
                found = visit(m, stack)
                if found:
                    return found
        stack.pop()
        state[n] = 2
        return None

    for n in sorted(graph):
        if n not in state:
            found = visit(n, [])
            if found:
                return found
    return None


def door_crossings(paths, graph, layer, door, may):
    """The includes that cross between libringk's runtime and the layer under @layer other than
    through its @door, or from the layer into the runtime other than the headers of @may."""
    bad = []
    for p in paths:
        if not p.startswith('src/ringk/'):
            continue
        for q in graph[p]:
            p_in, q_in = p.startswith(layer), q.startswith(layer)
            if p_in and not q_in and q.startswith('src/ringk/') and q not in may:
                bad.append('%s includes %s' % (p, q))
            if not p_in and q_in and q != door:
                bad.append('%s includes %s' % (p, q))
    return bad


def main():
    top = sys.argv[1]
    paths = files(top)
    graph = {p: includes(top, p) for p in paths}
    if '--graph' in sys.argv:
        for p in paths:
            for q in graph[p]:
                print('%s -> %s' % (p, q))
        return 0
    results = []
    big = [(p, n) for p in paths for n in [sum(1 for _ in open(os.path.join(top, p)))]
           if n > MAX_LINES]
    results.append((not big, 'no source of src/ over %d lines' % MAX_LINES,
                    ['%s: %d lines' % b for b in big]))
    longf = [(p,) + f for p in paths if p.endswith('.c') for f in long_functions(top, p)]
    results.append((not longf, 'no function of src/ over %d lines' % MAX_FUNC,
                    ['%s:%d: %s (%d lines)' % (p, s, n, l) for p, n, s, l in longf]))
    c = cycle(graph)
    results.append((c is None, 'the include graph has no cycle', [' -> '.join(c or [])]))
    bad = door_crossings(paths, graph, 'src/ringk/net/', 'src/ringk/net/ringk_net.h',
                         NET_MAY_INCLUDE)
    results.append((not bad, 'the runtime reaches the network layer through ringk_net.h only, '
                    'which includes no more of the runtime than ringk_internal.h', bad))
    bad = door_crossings(paths, graph, 'src/ringk/dev/', 'src/ringk/dev/ringk_dev.h',
                         DEV_MAY_INCLUDE)
    results.append((not bad, 'the runtime reaches the device executor through dev/ringk_dev.h '
                    'only, which includes no more of the runtime than ringk_internal.h and '
                    'ringk_exec.h', bad))
    print('1..%d' % len(results))
    for i, (ok, what, why) in enumerate(results, 1):
        print('%s %d - %s' % ('ok' if ok else 'not ok', i, what))
        if not ok:
            for w in why:
                print('# ' + w)
    return 0


if __name__ == '__main__':
    sys.exit(main())
