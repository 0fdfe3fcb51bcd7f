"""The agent's sockets: one set per probe address (per NIC on a multi-rail host).

It runs on the far host under any Python 3.8+: standard library only, no ``match``, no
annotations evaluated at run time. Shipped in the agent bundle (``bootstrap.py``).

Each rail is a probe address (``params["rails"]``: ``[[nic, address], ...]``, else the one
``bind`` address) with its own answering socket and ``ports`` source sockets, so a probe
leaves from, and is answered on, the NIC it names: a bad NIC shows as that NIC's loss.
Rails are aligned: a source socket on rail ``r`` probes the peer's rail ``r`` (modulo the
peer's count), as rail-optimised fabrics connect NIC ``r`` of every host to plane ``r``.
A fixed answering port (``port``) must bind; the ports of the previous scan
(``port_wish`` per rail, ``sports``: the same 5-tuples, so known paths stay known) are wishes, and
a taken one is replaced by any free port. ``tos``: the IP TOS byte every probe carries
(0: unmarked; ``cwctl watch`` marks probes that must keep crossing an avoided element).
"""

import errno
import socket


def make_socket(address, port, tos=0):
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 21)
    if tos:  # probes marked to keep crossing an element a reroute avoids
        sock.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, tos)
    try:
        sock.bind((address, port))
    except OSError:
        sock.close()
        raise
    sock.setblocking(False)
    return sock


def wish_socket(address, port, tos=0):
    """A socket on ``port`` if it is free, else on any port."""
    if port:
        try:
            return make_socket(address, int(port), tos)
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE:
                raise
    return make_socket(address, 0, tos)


class Rails:
    def __init__(self, params):
        """The sockets ``params`` (``AgentParams``) asks for, every rail's."""
        binds, port, n_ports, tos = params.rails, params.port, params.ports, params.tos
        wishes, answer_wish = params.sports, params.port_wish
        self.nics = []  # per rail: its NIC name (None: the host's one address)
        self.answers = []  # per rail: its answering socket
        self.sources = []  # every source socket, rail after rail
        self.source_rail = []  # per source socket: its rail
        for r, (nic, address) in enumerate(binds):
            self.nics.append(nic)
            if port:
                self.answers.append(make_socket(address, port, tos))
            else:
                wish = answer_wish[r] if r < len(answer_wish) else 0
                self.answers.append(wish_socket(address, wish, tos))
            for i in range(n_ports):
                k = r * n_ports + i
                wish = wishes[k] if k < len(wishes) else 0
                self.sources.append(wish_socket(address, wish, tos))
                self.source_rail.append(r)
        self.rail_of = {s: r for r, s in enumerate(self.answers)}
        for i, s in enumerate(self.sources):
            self.rail_of[s] = self.source_rail[i]
        self.peer_rails = {}  # peer name -> [(address, port, sports)] per rail

    def all_sockets(self):
        return [*self.answers, *self.sources]

    def nic_of(self, sock):
        return self.nics[self.rail_of[sock]]

    def hello(self):
        """The hello's view: the first rail's address and port, every source port, and
        each rail (multi-rail hosts)."""
        out = {
            "address": self.answers[0].getsockname()[0],
            "port": self.answers[0].getsockname()[1],
            "sports": [s.getsockname()[1] for s in self.sources],
        }
        if len(self.answers) > 1 or self.nics[0] is not None:
            out["rails"] = [
                {
                    "nic": self.nics[r],
                    "address": answer.getsockname()[0],
                    "port": answer.getsockname()[1],
                    "sports": [
                        s.getsockname()[1]
                        for s, sr in zip(self.sources, self.source_rail)  # noqa: B905 (3.8)
                        if sr == r
                    ],
                }
                for r, answer in enumerate(self.answers)
            ]
        return out

    def learn_peer(self, name, entry):
        """A peer table entry ``[address, port]`` or ``[address, port, rails]``; the
        addresses it may send from (for the guard and the summary's counts)."""
        rails = entry[2] if len(entry) > 2 and entry[2] else None
        if rails:
            self.peer_rails[name] = [(str(a), int(p), [int(s) for s in sp]) for a, p, sp in rails]
        else:
            self.peer_rails[name] = [(str(entry[0]), int(entry[1]), [])]
        return [r[0] for r in self.peer_rails[name]]

    def destination(self, peer, sock):
        """Where a probe from ``sock`` to ``peer`` goes: the peer's rail aligned with ours."""
        rails = self.peer_rails[peer]
        address, port, _sports = rails[self.rail_of[sock] % len(rails)]
        return (address, port)

    def reply_socket(self, peer, sport):
        """The answering socket whose replies go back to ``peer``'s source port ``sport``,
        and the peer's address there: ``sport`` names the peer's rail."""
        rails = self.peer_rails.get(peer) or []
        for r, (address, _port, sports) in enumerate(rails):
            if sport in sports:
                return self.answers[r % len(self.answers)], address
        if not rails:
            return None, None
        return self.answers[0], rails[0][0]
