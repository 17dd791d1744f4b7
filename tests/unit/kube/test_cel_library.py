"""Kubernetes' lists, sets, URL, IP and CIDR libraries (kube.cel_library), case by case from upstream's docs."""

from __future__ import annotations

import pytest

from kubectl_gpushare.kube import cel

pytestmark = pytest.mark.skipif(not cel.available(), reason=cel.INSTALL_HINT)


def _eval(source: str) -> object:
    return cel.compile_expression(source, ("device",)).evaluate({"device": {"l": ["a", "b", "b"], "s": "abcb"}})


# Each: (expression, value), from the examples in library/lists.go, ext/sets.go, library/urls.go, ip.go, cidr.go.
CASES = [
    ("[1, 2, 3].isSorted()", True), ("['a', 'b', 'b', 'c'].isSorted()", True), ("[2.0, 1.0].isSorted()", False),
    ("[1].isSorted()", True), ("[].isSorted()", True), ("[1, 2.5, 3u].isSorted()", True),
    ("[1, 3].sum()", 4), ("[1.0, 3.0].sum()", 4.0), ("[].sum()", 0), ("[1u, 2u].sum() == 3u", True),
    ("[1, 3].min()", 1), ("[1, 3].max()", 3), ("[1].min()", 1), ("([0] + []).min()", 0), ("['b', 'a'].max()", "b"),
    ("[1, 2, 2, 3].indexOf(2)", 1), ("['a', 'b', 'b', 'c'].lastIndexOf('b')", 2), ("[1.0].indexOf(1.1)", -1),
    ("[].indexOf('string')", -1), ("[[1], [2]].indexOf([2.0])", 1), ("[true].indexOf(1)", -1),
    ("[{true: 1}].indexOf({1: 1})", -1), ("sets.contains([{1: true}], [{true: true}])", False),
    ("[{1: 1}].indexOf({1u: 1})", 0),  # numeric keys find each other, as cel-go's map lookup
    ('"abcb".indexOf("b") == 1 && "abcb".lastIndexOf("b") == 3', True),  # the strings extension's, still there
    ("device.l.lastIndexOf('b') == 2 && device.s.lastIndexOf('b') == 3", True),  # dispatched on the value
    ("sets.contains([], [])", True), ("sets.contains([], [1])", False), ("sets.contains([1, 2, 3, 4], [2, 3])", True),
    ("sets.contains([1, 2.0, 3u], [1.0, 2u, 3])", True), ("sets.equivalent([], [])", True),
    ("sets.equivalent([1], [1, 1])", True), ("sets.equivalent([1], [1u, 1.0])", True),
    ("sets.equivalent([1, 2, 3], [3u, 2.0, 1])", True), ("sets.equivalent([1, 2], [1])", False),
    ("sets.intersects([1], [])", False), ("sets.intersects([1], [1, 2])", True),
    ("sets.intersects([[1], [2, 3]], [[1, 2], [2, 3.0]])", True),
    ("isURL('https://user:pass@example.com:80/path?query=val#fragment')", True), ("isURL('/absolute-path')", True),
    ("isURL('https://a:b:c/')", False), ("isURL('../relative-path')", False), ("isURL('')", False),
    ("isURL('mailto:someone')", True), ("isURL('http://a b/')", False), ("isURL('/a%zz')", False),
    # net/url unescape(encodeHost): a host escapes only non-ASCII bytes, or %25 (an IPv6 zone, which may escape any).
    ("isURL('http://a%41b/')", False), ("isURL('http://a%C3%A9/')", True), ("isURL('http://[fe80::1%25en%41]/')", True),
    ("url('http://a%C3%A9:8/').getHostname()", "a\u00e9"),
    ("url('/path').getScheme()", ""), ("url('HTTPS://example.com/').getScheme()", "https"),
    ("url('https://example.com:80/').getHost()", "example.com:80"), ("url('https://[::1]:80/').getHost()", "[::1]:80"),
    ("url('https://[::1]/').getHost()", "[::1]"), ("url('/path').getHost()", ""),
    ("url('https://example.com:80/').getHostname()", "example.com"), ("url('https://[::1]:80/').getHostname()", "::1"),
    ("url('https://127.0.0.1:80/').getHostname()", "127.0.0.1"), ("url('https://example.com:80/').getPort()", "80"),
    ("url('https://example.com/').getPort()", ""), ("url('https://example.com/path').getEscapedPath()", "/path"),
    ("url('https://example.com/path with spaces/').getEscapedPath()", "/path%20with%20spaces/"),
    ("url('https://example.com/a(b)').getEscapedPath()", "/a(b)"), ("url('https://example.com').getEscapedPath()", ""),
    ("url('https://example.com/path?k1=a&k2=b&k2=c').getQuery()", {"k1": ["a"], "k2": ["b", "c"]}),
    ("url('https://example.com/path?key with spaces=value with spaces').getQuery()",
     {"key with spaces": ["value with spaces"]}),
    ("url('https://example.com/path?').getQuery()", {}), ("url('https://example.com/path').getQuery()", {}),
    ("url('https://example.com/p?a=1#frag').getQuery()", {"a": ["1"]}),
    ("url('https://example.com/p?a=1;b&c=2&d=%zz').getQuery()", {"c": ["2"]}),  # ParseQuery skips ';' anywhere
    ("ip('127.0.0.1').family()", 4), ("ip('::1').family() == 6", True), ("isIP('127.0.0.1')", True),
    ("isIP('::1')", True), ("isIP('127.0.0.256')", False), ("isIP(':::1')", False), ("isIP('::ffff:1.2.3.4')", False),
    ("isIP('fe80::1%eth0')", False), ("isIP('01.2.3.4')", False),
    ("ip.isCanonical('127.0.0.1')", True), ("ip.isCanonical('2001:db8::abcd')", True),
    ("ip.isCanonical('2001:DB8::ABCD')", False), ("ip.isCanonical('2001:db8::0:0:0:abcd')", False),
    ("ip('0.0.0.0').isUnspecified()", True), ("ip('127.0.0.1').isUnspecified()", False),
    ("ip('::').isUnspecified()", True),
    ("ip('127.0.0.1').isLoopback()", True), ("ip('192.168.0.1').isLoopback()", False), ("ip('::1').isLoopback()", True),
    ("ip('2001:db8::abcd').isLoopback()", False), ("ip('224.0.0.1').isLinkLocalMulticast()", True),
    ("ip('224.0.1.1').isLinkLocalMulticast()", False), ("ip('ff02::1').isLinkLocalMulticast()", True),
    ("ip('fd00::1').isLinkLocalMulticast()", False), ("ip('169.254.169.254').isLinkLocalUnicast()", True),
    ("ip('192.168.0.1').isLinkLocalUnicast()", False), ("ip('fe80::1').isLinkLocalUnicast()", True),
    ("ip('fd80::1').isLinkLocalUnicast()", False), ("ip('192.168.0.1').isGlobalUnicast()", True),
    ("ip('255.255.255.255').isGlobalUnicast()", False), ("ip('2001:db8::abcd').isGlobalUnicast()", True),
    ("ip('ff00::1').isGlobalUnicast()", False), ("string(ip('2001:DB8::0:1'))", "2001:db8::1"),
    ("ip('::1') == ip('0:0:0:0:0:0:0:1')", True),
    ("isCIDR('192.168.0.0/16')", True), ("isCIDR('::1/128')", True), ("isCIDR('192.168.0.0/33')", False),
    ("isCIDR('::1/129')", False), ("isCIDR('10.0.0.0/08')", False), ("isCIDR('::ffff:1.2.3.4/120')", False),
    ("isCIDR('10.0.0.0')", False),
    ("cidr('192.168.0.0/24').containsIP(ip('192.168.0.1'))", True),
    ("cidr('192.168.0.0/24').containsIP(ip('192.168.1.1'))", False),
    ("cidr('192.168.0.0/24').containsIP('192.168.0.1')", True), ("cidr('192.168.0.0/24').containsIP('::1')", False),
    ("cidr('192.168.0.0/16').containsCIDR(cidr('192.168.10.0/24'))", True),
    ("cidr('192.168.1.0/24').containsCIDR(cidr('192.168.2.0/24'))", False),
    ("cidr('192.168.0.0/16').containsCIDR('192.168.10.0/24')", True),
    ("cidr('192.168.0.0/24').containsCIDR('192.168.0.0/16')", False),
    ("cidr('192.168.0.1/24').ip() == ip('192.168.0.1')", True), ("cidr('::1/128').ip().family()", 6),
    ("cidr('192.168.0.1/24').masked() == cidr('192.168.0.0/24')", True),
    ("cidr('192.168.0.1/24') == cidr('192.168.0.1/24').masked()", False),
    ("cidr('192.168.0.0/16').prefixLength()", 16), ("cidr('::1/128').prefixLength()", 128),
    ("string(cidr('192.168.0.1/24').masked())", "192.168.0.0/24"),
]


@pytest.mark.parametrize(("source", "value"), CASES)
def test_each_function_answers_as_upstreams_examples(source: str, value: object) -> None:
    assert _eval(source) == value


ERRORS = [
    ("[].min()", "min called on empty list"),
    ("[].max()", "max called on empty list"),
    ("[1, 'a'].max()", "no such overload"),
    ("[[1], [2]].isSorted()", "no such overload"),
    ("[1, 2.0].sum()", "no such overload"),
    ("[9223372036854775807, 1].sum()", "integer overflow"),
    ("[double('NaN'), 1.0].isSorted()", "NaN values cannot be ordered"),
    ("[duration('1s')].sum()", "duration or timestamp result is not supported"),
    ("url('https://a:b:c/')",
     'URL parse error during conversion from string: parse "https://a:b:c/": invalid port ":c" after host'),
    # strconv.Quote (net/url's "invalid port %q"): a printable rune as it is, a control byte as \xNN.
    ("url('https://a:b:\u00e9/')",
     'URL parse error during conversion from string: parse "https://a:b:\u00e9/": invalid port ":\u00e9" after host'),
    ("ip('1.2.3.4\\x7f')", 'IP Address "1.2.3.4\\x7f" parse error during conversion from string: '
     'ParseAddr("1.2.3.4\\x7f")'),
    ("url('../relative-path')", "invalid URI for request"),
    ("url(':x')", "missing protocol scheme"),
    ("url('http://[::1/')", "missing ']' in host"),
    ("url('/a\\x01')", "invalid control character in URL"),
    ("ip('127.0.0.256')", 'IP Address "127.0.0.256" parse error during conversion from string'),
    ("ip('fe80::1%eth0')", 'IP address "fe80::1%eth0" with zone value is not allowed'),
    ("ip('::ffff:1.2.3.4')", 'IPv4-mapped IPv6 address "::ffff:1.2.3.4" is not allowed'),
    ("ip.isCanonical('x')", 'IP Address "x" parse error'),
    ("cidr('192.168.0.0/33')", "prefix length out of range"),
    ("cidr('192.168.0.0')", "network address parse error during conversion from string"),
    ("cidr('::ffff:1.2.3.4/120')", 'IPv4-mapped IPv6 address "::ffff:1.2.3.4/120" is not allowed'),
    ("cidr('10.0.0.0/8').containsIP('x')", 'IP Address "x" parse error'),
    ("quantity('1').family() == 4", "no such overload"),
]


@pytest.mark.parametrize(("source", "message"), ERRORS)
def test_bad_values_are_one_line_errors_with_upstreams_words(source: str, message: str) -> None:
    with pytest.raises(cel.CelError) as raised:
        _eval(source)
    assert message in str(raised.value) and "\n" not in str(raised.value)


def test_regex_find_is_left_out_and_refused_at_compile_time() -> None:
    # library/regex.go runs RE2; Python's re backtracks, so a hostile pattern could hang the allocator.
    for source in ("'abc'.find('b') == 'b'", "'abc'.findAll('b').size() == 1"):
        with pytest.raises(cel.CelError, match="undeclared reference to 'find"):
            cel.compile_expression(source, ("device",))


def test_an_ip_attribute_selects_devices_by_network() -> None:
    device = {"attributes": {"net.example.com": {"address": "10.1.2.3", "peers": ["10.1.2.4", "10.9.0.1"]}}}
    selector = ('cel.bind(a, device.attributes["net.example.com"], cidr("10.1.0.0/16").containsIP(a.address) && '
                'a.peers.indexOf("10.9.0.1") == 1 && a.peers.isSorted())')
    assert cel.compile_selector(selector).evaluate_bool({"device": device}) is True
