"""Kernel timestamps on UDP sockets, and what an interface can stamp.

It runs on the far host under any Python 3.8+: standard library only, no ``match``, no
annotations evaluated at run time. Shipped in the agent bundle (``bootstrap.py``).
"""

import socket
import struct

# Kernel constants the socket module lacks.
# include/uapi/asm-generic/socket.h
SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)  # SCM_TIMESTAMPNS == SO_TIMESTAMPNS
SO_TIMESTAMPING = getattr(socket, "SO_TIMESTAMPING", 37)  # SCM_TIMESTAMPING == SO_TIMESTAMPING
# include/uapi/linux/net_tstamp.h (enum SOF_TIMESTAMPING_*)
SOF_TIMESTAMPING_TX_SOFTWARE = 1 << 1
SOF_TIMESTAMPING_SOFTWARE = 1 << 4
SOF_TIMESTAMPING_TX_HARDWARE = 1 << 0
SOF_TIMESTAMPING_RX_HARDWARE = 1 << 2
# include/uapi/linux/sockios.h; include/uapi/linux/ethtool.h (struct ethtool_ts_info)
SIOCGIFADDR = 0x8915
SIOCGIFNETMASK = 0x891B
SIOCETHTOOL = 0x8946
ETHTOOL_GET_TS_INFO = 0x41
# include/uapi/linux/in.h
IP_RECVERR = getattr(socket, "IP_RECVERR", 11)
# include/uapi/linux/errqueue.h: struct sock_extended_err (then the offender's sockaddr)
EXTENDED_ERR = struct.Struct("=IBBBBII")
SO_EE_ORIGIN_ICMP = 2
SO_EE_ORIGIN_TIMESTAMPING = 4
MSG_ERRQUEUE = getattr(socket, "MSG_ERRQUEUE", 0x2000)  # include/linux/socket.h
TIMESPEC = struct.Struct("@ll")  # struct timespec (64-bit: two longs)
TIMESPEC3 = struct.Struct("@llllll")  # struct scm_timestamping: software, legacy, hardware
# control-message room for a receive (one timespec) and for an error-queue message
# (scm_timestamping, the sock_extended_err with its offender address, a spare)
RX_ANCILLARY = socket.CMSG_SPACE(TIMESPEC.size) + 64
ERR_ANCILLARY = 512
# a TX stamp asked for one datagram (sendmsg's control message, Linux 4.6 and later)
TX_STAMP_REQUEST = [
    (socket.SOL_SOCKET, SO_TIMESTAMPING, struct.pack("I", SOF_TIMESTAMPING_TX_SOFTWARE))
]
PER_PACKET_KERNEL = (4, 6)


def kernel_stamp(ancdata):
    """The software timestamp in a message's control data, ns since the epoch, or 0."""
    if len(ancdata) == 1:  # the usual receive: one SO_TIMESTAMPNS, no loop
        level, kind, data = ancdata[0]
        if kind == SO_TIMESTAMPNS and level == socket.SOL_SOCKET and len(data) >= TIMESPEC.size:
            sec, nsec = TIMESPEC.unpack_from(data)
            return sec * 1000000000 + nsec
    for level, kind, data in ancdata:
        if level != socket.SOL_SOCKET:
            continue
        if kind == SO_TIMESTAMPNS and len(data) >= TIMESPEC.size:
            sec, nsec = TIMESPEC.unpack(data[: TIMESPEC.size])
            return sec * 1000000000 + nsec
        if kind == SO_TIMESTAMPING and len(data) >= TIMESPEC3.size:
            sec, nsec = TIMESPEC3.unpack(data[: TIMESPEC3.size])[:2]
            if sec or nsec:
                return sec * 1000000000 + nsec
    return 0


def error_origin(ancdata):
    """Who queued an error-queue message (``ee_origin``: the kernel's TX timestamping,
    an ICMP error, ...), from its ``IP_RECVERR`` control message; None without one. Only
    the kernel writes it: a packet from the network can claim nothing here."""
    for level, kind, data in ancdata:
        if level == socket.IPPROTO_IP and kind == IP_RECVERR and len(data) >= EXTENDED_ERR.size:
            return EXTENDED_ERR.unpack(data[: EXTENDED_ERR.size])[1]
    return None


def per_packet_stamps(release):
    """Can a datagram ask for its own TX stamp (``TX_STAMP_REQUEST``) on this kernel
    (``platform.release()``)? Older kernels ignore that control message silently."""
    try:
        major, minor = release.split(".")[:2]
        return (int(major), int("".join(c for c in minor if c.isdigit()) or 0)) >= PER_PACKET_KERNEL
    except ValueError:
        return False


def enable_timestamps(sock, per_packet=False):
    """Ask for kernel RX (SO_TIMESTAMPNS) and software TX stamps; say which took.

    ``per_packet``: only report software stamps socket-wide; each datagram that wants a
    TX stamp asks with ``TX_STAMP_REQUEST``, so the others (follow-ups, path traces)
    cost no stamp and no error-queue read."""
    rx = tx = False
    try:
        sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        rx = True
    except OSError:
        pass
    try:
        flags = SOF_TIMESTAMPING_SOFTWARE | (0 if per_packet else SOF_TIMESTAMPING_TX_SOFTWARE)
        sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPING, flags)
        tx = True
    except OSError:
        pass
    return rx, tx


def _ifreq_ipv4(sock, request, name):
    """An interface's IPv4 address or netmask (SIOCGIFADDR/SIOCGIFNETMASK) as an int."""
    import fcntl

    out = fcntl.ioctl(sock.fileno(), request, struct.pack("256s", name.encode()[:15]))
    return struct.unpack("!I", out[20:24])[0]


def interface_of(address):
    """The interface whose IPv4 subnet holds ``address`` (longest netmask wins), or None."""
    try:
        want = struct.unpack("!I", socket.inet_aton(address))[0]
    except OSError:
        return None
    best, best_mask = None, -1
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        for _index, name in socket.if_nameindex():
            try:
                addr = _ifreq_ipv4(sock, SIOCGIFADDR, name)
                mask = _ifreq_ipv4(sock, SIOCGIFNETMASK, name)
            except OSError:
                continue
            if addr & mask == want & mask and mask > best_mask:
                best, best_mask = name, mask
    finally:
        sock.close()
    return best


def nic_timestamping(name):
    """What the interface can stamp (ETHTOOL_GET_TS_INFO): a dict, or {} if unknown."""
    import ctypes
    import fcntl

    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        info = ctypes.create_string_buffer(struct.pack("I", ETHTOOL_GET_TS_INFO), 48)
        ifreq = struct.pack("16sP", name.encode()[:15], ctypes.addressof(info)).ljust(40, b"\0")
        fcntl.ioctl(sock.fileno(), SIOCETHTOOL, ifreq)
        _cmd, caps, phc, _tx_types = struct.unpack_from("IIiI", info.raw)
    except (OSError, ValueError, ImportError):
        return {}
    finally:
        sock.close()
    hw = SOF_TIMESTAMPING_TX_HARDWARE | SOF_TIMESTAMPING_RX_HARDWARE
    return {"iface": name, "hw": caps & hw == hw, "phc": phc, "so_timestamping": caps}
