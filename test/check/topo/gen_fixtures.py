#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
# Writes the hwloc 2 XML topology fixtures of the topology tests. Each describes a machine made
# up for this project (not captured from or copied off another project): packages with NUMA
# nodes and cores, PCI host bridges, PCIe switches (one bridge object per switch level), GPUs
# and NICs, and NVLinks as info attributes on the GPUs' PCI objects (RingkNVLinkVersion,
# RingkNVSwitchLinks, RingkNVLinks="BUSID:LINKS,..."). Run it to regenerate the .xml files.
import os

HERE = os.path.dirname(os.path.abspath(__file__))
GEN4_X16 = 31.507692   # GB/s, PCIe gen4 x16 after 128b/130b encoding
GEN5_X16 = 63.015385   # GB/s, PCIe gen5 x16
GEN3_X16 = 15.753846   # GB/s, PCIe gen3 x16


class Gen:
    def __init__(self):
        self.gp = 0
        self.lines = []

    def gp_index(self):
        self.gp += 1
        return self.gp

    def emit(self, depth, text):
        self.lines.append("  " * depth + text)


def cpuset(pus):
    mask = 0
    for p in pus:
        mask |= 1 << p
    return "0x%08x" % mask


def nodeset(nodes):
    return cpuset(nodes)


def machine(name, packages):
    """packages: list of dicts {numa: os index, pus: [pu indexes], io: [host bridge trees]}"""
    g = Gen()
    all_pus = [p for pkg in packages for p in pkg["pus"]]
    all_nodes = [pkg["numa"] for pkg in packages]
    g.emit(0, '<?xml version="1.0" encoding="UTF-8"?>')
    g.emit(0, '<!DOCTYPE topology SYSTEM "hwloc2.dtd">')
    g.emit(0, '<topology version="2.0">')
    cs, ns = cpuset(all_pus), nodeset(all_nodes)
    g.emit(1, '<object type="Machine" os_index="0" cpuset="%s" complete_cpuset="%s" '
              'allowed_cpuset="%s" nodeset="%s" complete_nodeset="%s" allowed_nodeset="%s" '
              'gp_index="%d">' % (cs, cs, cs, ns, ns, ns, g.gp_index()))
    g.emit(2, '<info name="Backend" value="ringk-fixture"/>')
    g.emit(2, '<info name="HostName" value="%s"/>' % name)
    for i, pkg in enumerate(packages):
        pcs, pns = cpuset(pkg["pus"]), nodeset([pkg["numa"]])
        g.emit(2, '<object type="Package" os_index="%d" cpuset="%s" complete_cpuset="%s" '
                  'nodeset="%s" complete_nodeset="%s" gp_index="%d">'
                  % (i, pcs, pcs, pns, pns, g.gp_index()))
        g.emit(3, '<object type="NUMANode" os_index="%d" cpuset="%s" complete_cpuset="%s" '
                  'nodeset="%s" complete_nodeset="%s" gp_index="%d" local_memory="68719476736"/>'
                  % (pkg["numa"], pcs, pcs, pns, pns, g.gp_index()))
        for pu in pkg["pus"]:
            c = cpuset([pu])
            g.emit(3, '<object type="Core" os_index="%d" cpuset="%s" complete_cpuset="%s" '
                      'nodeset="%s" complete_nodeset="%s" gp_index="%d">'
                      % (pu, c, c, pns, pns, g.gp_index()))
            g.emit(4, '<object type="PU" os_index="%d" cpuset="%s" complete_cpuset="%s" '
                      'nodeset="%s" complete_nodeset="%s" gp_index="%d"/>'
                      % (pu, c, c, pns, pns, g.gp_index()))
            g.emit(3, '</object>')
        for hb in pkg["io"]:
            io_tree(g, 3, hb, host=True)
        g.emit(2, '</object>')
    g.emit(1, '</object>')
    g.emit(0, '</topology>')
    return "\n".join(g.lines) + "\n"


def io_tree(g, depth, node, host=False):
    kind = node["kind"]
    if kind == "bridge":
        lo, hi = node["buses"]
        if host:
            g.emit(depth, '<object type="Bridge" gp_index="%d" bridge_type="0-1" depth="0" '
                          'bridge_pci="%04x:[%02x-%02x]">' % (g.gp_index(), node.get("domain", 0), lo, hi))
        else:
            g.emit(depth, '<object type="Bridge" gp_index="%d" bridge_type="1-1" depth="%d" '
                          'bridge_pci="%04x:[%02x-%02x]" pci_busid="%s" '
                          'pci_type="0604 [%s] [0000:0000] 01" pci_link_speed="%f">'
                          % (g.gp_index(), node["depth"], node.get("domain", 0), lo, hi,
                             node["busid"], node.get("ids", "1000:c010"), node["speed"]))
        for child in node["children"]:
            io_tree(g, depth + 1, child)
        g.emit(depth, '</object>')
    else:
        cls = {"gpu": "0302", "nic": "0207", "disk": "0108"}[kind]
        ids = node.get("ids", {"gpu": "10de:2330", "nic": "15b3:101d", "disk": "144d:a80a"}[kind])
        attrs = ('<object type="PCIDev" gp_index="%d" pci_busid="%s" pci_type="%s [%s] [0000:0000] a1" '
                 'pci_link_speed="%f"' % (g.gp_index(), node["busid"], cls, ids, node["speed"]))
        infos = node.get("info", [])
        if not infos:
            g.emit(depth, attrs + "/>")
            return
        g.emit(depth, attrs + ">")
        for k, v in infos:
            g.emit(depth + 1, '<info name="%s" value="%s"/>' % (k, v))
        g.emit(depth, '</object>')


def gpu(busid, speed, info=()):
    return {"kind": "gpu", "busid": busid, "speed": speed, "info": list(info)}


def nic(busid, speed):
    return {"kind": "nic", "busid": busid, "speed": speed}


def switch(busid, buses, depth, speed, children):
    return {"kind": "bridge", "busid": busid, "buses": buses, "depth": depth, "speed": speed,
            "children": children}


def host_bridge(buses, children):
    return {"kind": "bridge", "buses": buses, "children": children}


def nvswitch_gpu(busid):
    return gpu(busid, GEN5_X16, [("RingkNVLinkVersion", "4"), ("RingkNVSwitchLinks", "18")])


def dgx_like():
    """(1) 8 GPUs on an NVSwitch fabric, 2 sockets, each socket 2 host bridges, each host
    bridge a two-level PCIe switch with 2 GPUs (one per lower switch) and a NIC."""
    pkgs = []
    n = 0
    for s in range(2):
        io = []
        for h in range(2):
            base = 0x10 + 0x40 * (2 * s + h)
            g0 = "0000:%02x:00.0" % (base + 4)
            g1 = "0000:%02x:00.0" % (base + 8)
            lower0 = switch("0000:%02x:00.0" % (base + 3), (base + 4, base + 4), 2, GEN5_X16, [nvswitch_gpu(g0)])
            lower1 = switch("0000:%02x:01.0" % (base + 3), (base + 8, base + 8), 2, GEN5_X16, [nvswitch_gpu(g1)])
            top = switch("0000:%02x:00.0" % (base + 2), (base + 3, base + 9), 1, GEN5_X16,
                         [lower0, lower1, nic("0000:%02x:00.0" % (base + 9), GEN5_X16)])
            io.append(host_bridge((base, base + 0x3f), [top]))
            n += 2
        pkgs.append({"numa": s, "pus": list(range(4 * s, 4 * s + 4)), "io": io})
    return machine("fixture-nvswitch-8gpu", pkgs)


def pcie_4gpu():
    """(2) 4 GPUs, PCIe only, one socket, one host bridge with two PCIe switches of 2 GPUs."""
    sw0 = switch("0000:02:00.0", (0x03, 0x05), 1, GEN4_X16,
                 [gpu("0000:04:00.0", GEN4_X16), gpu("0000:05:00.0", GEN4_X16)])
    sw1 = switch("0000:02:01.0", (0x06, 0x08), 1, GEN4_X16,
                 [gpu("0000:07:00.0", GEN4_X16), gpu("0000:08:00.0", GEN4_X16)])
    return machine("fixture-pcie-4gpu", [{"numa": 0, "pus": [0, 1, 2, 3],
                                          "io": [host_bridge((0x00, 0x08), [sw0, sw1])]}])


def dual_socket():
    """(3) 2 sockets; GPU0 and GPU1 on socket 0 under different host bridges, GPU2 on socket 1,
    and GPU0-GPU2 joined by 2 direct NVLinks (gen 3)."""
    g0 = gpu("0000:17:00.0", GEN4_X16, [("RingkNVLinkVersion", "3"),
                                       ("RingkNVLinks", "0000:b1:00.0:2")])
    g1 = gpu("0000:3b:00.0", GEN4_X16)
    g2 = gpu("0000:b1:00.0", GEN4_X16, [("RingkNVLinkVersion", "3"),
                                       ("RingkNVLinks", "0000:17:00.0:2")])
    p0 = {"numa": 0, "pus": [0, 1], "io": [host_bridge((0x16, 0x17), [g0]),
                                           host_bridge((0x3a, 0x3b), [g1])]}
    p1 = {"numa": 1, "pus": [2, 3], "io": [host_bridge((0xb0, 0xb1), [g2])]}
    return machine("fixture-dual-socket", [p0, p1])


def vm_flat():
    """(4) a VM: 4 GPUs straight under one host bridge, no switches, no NVLink described."""
    gpus = [gpu("0000:00:%02x.0" % (5 + i), GEN4_X16) for i in range(4)]
    return machine("fixture-vm-flat", [{"numa": 0, "pus": [0, 1],
                                        "io": [host_bridge((0x00, 0x00), gpus)]}])


def no_gpu():
    """(5) a host without GPUs: one NIC and one disk."""
    devs = [nic("0000:01:00.0", GEN3_X16),
            {"kind": "disk", "busid": "0000:02:00.0", "speed": 3.938462}]
    return machine("fixture-no-gpu", [{"numa": 0, "pus": [0, 1],
                                       "io": [host_bridge((0x00, 0x02), devs)]}])


FIXTURES = {
    "nvswitch-8gpu.xml": dgx_like,
    "pcie-4gpu.xml": pcie_4gpu,
    "dual-socket.xml": dual_socket,
    "vm-flat.xml": vm_flat,
    "no-gpu.xml": no_gpu,
}

if __name__ == "__main__":
    for name, fn in FIXTURES.items():
        with open(os.path.join(HERE, name), "w") as f:
            f.write(fn())
        print("wrote", name)
