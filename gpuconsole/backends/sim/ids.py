"""Identifiers in the formats the real systems use, drawn from the world's seeded generator.

Panes key their rows by these strings and users copy them into ``kubectl`` or the AWS
console, so they must look real: ``GPU-…`` UUIDs, ``i-`` plus 17 hex digits, EC2 private DNS
names, RFC 1123 job names with a ``generateName``-style suffix.
"""

from __future__ import annotations

import random

from gpuconsole.backends.sim.catalog import VPC_SECOND_OCTET, region_of

# The alphabet Kubernetes uses for generated name suffixes (no vowels, no look-alikes).
SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
# A UUID4's version (4) and variant (10) bits, set in one step.
UUID4_KEEP = ~((0xF << 76) | (0xC << 60))
UUID4_SET = (0x4 << 76) | (0x8 << 60)


def dashed(value: int) -> str:
    """A 128-bit value in the 8-4-4-4-12 hex groups of a UUID."""
    h = f"{value:032x}"
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


class IdFactory:
    """Makes identifiers from one :class:`random.Random`, so a seed fixes every id."""

    def __init__(self, rng: random.Random) -> None:
        self._rng = rng
        self._ips: set[str] = set()

    def gpu_uuid(self) -> str:
        return "GPU-" + dashed(self._rng.getrandbits(128))

    def mig_uuid(self) -> str:
        return "MIG-" + dashed(self._rng.getrandbits(128))

    def uuid4(self) -> str:
        """A UUID4-shaped string (version and variant bits set), as Kubernetes UIDs are."""
        return dashed((self._rng.getrandbits(128) & UUID4_KEEP) | UUID4_SET)

    def instance_id(self) -> str:
        return f"i-{self._rng.getrandbits(68):017x}"

    def resource_id(self, prefix: str) -> str:
        """An EC2 resource id in the long format: ``vpc-``, ``subnet-``, ``sg-``, ``ami-`` + 17 hex."""
        return f"{prefix}-{self._rng.getrandbits(68):017x}"

    def suffix(self, length: int = 5) -> str:
        """``length`` letters of the alphabet, drawn as ``random.choice`` draws each (the same
        letters from the same seed), without its per-letter call overhead."""
        getrandbits, size, letters = self._rng.getrandbits, len(SUFFIX_ALPHABET), []
        bits = size.bit_length()
        for _ in range(length):
            r = getrandbits(bits)
            while r >= size:
                r = getrandbits(bits)
            letters.append(SUFFIX_ALPHABET[r])
        return "".join(letters)

    def private_ip(self, availability_zone: str) -> str:
        """A free address in the zone's /20 subnet of its region's VPC (10.<region>.<zone>.x)."""
        region = region_of(availability_zone)
        second = VPC_SECOND_OCTET.get(region, 2)
        zone_base = 16 * (ord(availability_zone[-1]) - ord("a"))
        while True:
            ip = f"10.{second}.{zone_base + self._rng.randrange(16)}.{self._rng.randrange(4, 255)}"
            if ip not in self._ips:
                self._ips.add(ip)
                return ip

    @staticmethod
    def node_name(ip: str, availability_zone: str) -> str:
        """The EC2 private DNS name, which EKS uses as the Kubernetes node name."""
        dashed = "ip-" + ip.replace(".", "-")
        region = region_of(availability_zone)
        if region == "us-east-1":
            return f"{dashed}.ec2.internal"
        return f"{dashed}.{region}.compute.internal"
