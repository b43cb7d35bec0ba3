#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""The sources' layout, checked: no file of src/ (libringk, the UCT plugin, the core they share,
the tools) over MAX_LINES lines, no function over MAX_FUNC lines, and an include graph without
cycles in which the network layer (src/ringk/net/) is reached from the runtime only through
net/ringk_net.h and includes nothing of the runtime but ringk_internal.h, and the device
executor (src/ringk/dev/) only through dev/ringk_dev.h, including nothing of the runtime but
ringk_internal.h and ringk_exec.h. The calls are held to the same rule as the includes: the
network layer calls only what ringk_internal.h (and the headers of the runtime it includes)
declares, the runtime only what net/ringk_net.h declares, and no call up from the network
layer leads back down into it, and a one-way send (ringk_send, ringk_send_route) never calls
into a file it left (a call graph read from the sources: direct calls by name, not calls
through pointers). Prints TAP; with --graph, prints the include graph (local
includes) instead.

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


ATTR_WORDS = {'__attribute__', 'always_inline', 'noinline', 'visibility', 'unused', 'aligned',
              'format', 'weak', 'noreturn', 'cold', 'hot', 'UCS_F_ALWAYS_INLINE'}


def functions(top, path):
    """{name: body} of the functions @path defines (a definition starts at column 0 and its body
    ends at the first '}' at column 0)."""
    out, sig, body, name = {}, None, None, None
    for line in open(os.path.join(top, path)):
        if body is not None:
            if line.startswith('}'):
                out[name] = ''.join(body)
                body = None
            else:
                body.append(line)
            continue
        if sig is None:
            if re.match(r'[A-Za-z_].*\(', line) and not line.rstrip().endswith(';') and \
                    not line.startswith(('typedef', 'struct', 'enum', 'union', '#')):
                sig = ''
            else:
                continue
        sig += line
        if sig.rstrip().endswith(';'):
            sig = None
        elif '{' in line:
            names = [n for n in re.findall(r'(\w+)\s*\(', sig.split('{')[0])
                     if n not in ATTR_WORDS]
            if names and '=' not in sig.split('(')[0]:
                name, body = names[0], [sig.split('{', 1)[1]]
            sig = None
    return out


def calls_across(top, paths):
    """The calls between libringk's runtime (src/ringk/*.c) and its network layer
    (src/ringk/net/*.c): (problems, a cycle of calls through both as a list, or None). A call
    from the network layer must be to a function ringk_internal.h declares, a call into it to
    one net/ringk_net.h declares."""
    layer, defs = {}, {}
    for p in paths:
        if p.endswith('.c') and p.startswith('src/ringk/') and not p.startswith('src/ringk/dev/'):
            for n, b in functions(top, p).items():
                layer[n] = 'net' if p.startswith('src/ringk/net/') else 'rt'
                defs[n] = (p, b)
    declared = {}
    for h, who in (('src/ringk/ringk_internal.h', 'rt'), ('src/ringk/net/ringk_net.h', 'net')):
        # the header and the headers of its side it includes (ringk_log.h for the runtime)
        hs, todo = set(), [h]
        while todo:
            x = todo.pop()
            if x not in hs and x.startswith(os.path.dirname(h) + '/'):
                hs.add(x)
                todo.extend(includes(top, x))
        text = ''.join(open(os.path.join(top, x)).read() for x in hs
                       if who == 'net' or not x.startswith('src/ringk/net/'))
        declared[who] = set(re.findall(r'(\w+)\s*\(', text))
    graph, bad = {}, []
    for n, (p, b) in defs.items():
        callees = {c for c in re.findall(r'(\w+)\s*\(', b) if c in defs and c != n}
        graph[n] = sorted(callees)
        for c in callees:
            if layer[n] != layer[c] and c not in declared[layer[c]]:
                bad.append('%s: %s calls %s, which %s does not declare' %
                           (p, n, c, 'ringk_internal.h' if layer[c] == 'rt' else 'ringk_net.h'))
    # a cycle of calls that crosses between the layers: one through an edge from the network
    # layer up into the runtime
    for n in sorted(graph):
        for c in graph[n]:
            if layer[n] == 'net' and layer[c] == 'rt':
                path = reach(graph, c, n)
                if path:
                    return bad, [n] + path
    return bad, None


# calls a send's path makes that carry other messages, not the one it follows: the worker's
# progress (a wait for credits progresses it, and receive callbacks deliver what came in)
SIDE_CALLS = {'ringk_remote_poll'}


def call_graph(top, paths):
    """{name: (file, sorted callees)} of the functions of libringk's runtime and network layer
    (src/ringk/*.c and src/ringk/net/*.c), direct calls by name."""
    defs = {}
    for p in paths:
        if p.endswith('.c') and p.startswith('src/ringk/') and not p.startswith('src/ringk/dev/'):
            for n, b in functions(top, p).items():
                defs[n] = (p, b)
    out = {}
    for n, (p, b) in defs.items():
        code = re.sub(r'/\*.*?\*/|//[^\n]*|"(?:\\.|[^"\\])*"', ' ', b, flags=re.S)
        out[n] = (p, sorted({c for c in re.findall(r'(\w+)\s*\(', code)
                             if c in defs and c != n and c not in SIDE_CALLS}))
    return out


def returns_to_file(graph, roots):
    """Call paths from @roots that call into a file they left: a list of such paths, each as
    'a (file) -> b (file) -> ...'. A path may stay in a file, call into another and return,
    but no call along it enters a file it had left."""
    bad, seen = [], set()

    def visit(n, stack, files):
        f, callees = graph[n]
        for c in callees:
            cf = graph[c][0]
            if cf != f and cf in files:
                bad.append(' -> '.join('%s (%s)' % (m, graph[m][0]) for m in stack + [c]))
                continue
            key = (c, tuple(files))
            if c in stack or key in seen:
                continue
            seen.add(key)
            visit(c, stack + [c], files + ([cf] if cf != f else []))

    for r in roots:
        visit(r, [r], [graph[r][0]])
    return bad


def reach(graph, a, b):
    """A call path from @a to @b in @graph, as a list, or None."""
    seen, todo = {a: None}, [a]
    while todo:
        n = todo.pop()
        if n == b:
            out = []
            while n is not None:
                out.append(n)
                n = seen[n]
            return out[::-1]
        for m in graph.get(n, ()):
            if m not in seen:
                seen[m] = n
                todo.append(m)
    return None


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
    bad, loop = calls_across(top, paths)
    results.append((not bad, 'the network layer calls no more of the runtime than '
                    'ringk_internal.h declares, the runtime none of it but what ringk_net.h '
                    'declares', bad))
    results.append((loop is None, 'no call from the network layer into the runtime leads back '
                    'into the network layer', [' -> '.join(loop or [])]))
    bad = returns_to_file(call_graph(top, paths), ('ringk_send', 'ringk_send_route'))
    results.append((not bad, 'a one-way send (ringk_send, ringk_send_route) never calls into a '
                    'file it left, down to its memcpy or ucp_am_send_nbx', bad[:20]))
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
