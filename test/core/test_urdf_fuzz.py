"""Fuzzing the URDF loader: every input gives a sound model or an rd.URDFError naming the culprit.

Hypothesis mutates the shipped arms and random trees (random_trees.py) element by element,
builds trees from scratch with arbitrary structure and numbers, and feeds random bytes. The
property is always `load_or_refuse`: either rd.URDFError (a ValueError) whose message names a
link or joint of the document (or says what is wrong with the document as a whole), or a model
whose rnea, gravity, mass matrix and forward dynamics are finite at a random state, with M
symmetric positive definite. Any other exception, a hang or a NaN fails.

Runs are derandomized and database-free, so CI replays the same examples (URDF_FUZZ_EXAMPLES=20000
URDF_FUZZ_RANDOM=1 hunts deeper). Every failure mode the fuzzing found is pinned by a plain
example test at the end of this file.
"""
import copy
import os
import pathlib
import re
import time
import warnings
import xml.etree.ElementTree as ET

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings, strategies as st

import robot_dynamics as rd
from random_trees import random_urdf

EXAMPLES = int(os.environ.get("URDF_FUZZ_EXAMPLES", "400"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, database=None,
                derandomize="URDF_FUZZ_RANDOM" not in os.environ,
                suppress_health_check=list(HealthCheck))
SHIPPED = {name: pathlib.Path(rd.robot_urdf(name)).read_text() for name in ("panda", "ur5e")}
SEEDS = {**SHIPPED, **{f"tree{seed}": random_urdf(seed, n) for seed, n in
                       ((1, 1), (2, 3), (3, 6), (4, 9))}}
DEFAULT_KWARGS = {"panda": dict(tip="panda_hand")}  # the whole Panda has a mimic finger
DOCUMENT_LEVEL = re.compile(r"(?i)xml|<robot>|no <link>|doctype|xacro|cannot read|root link"
                            r"|number \d+ in the URDF has no name|^gravity must be")
GIST = re.compile(r"'[^']*'|[-+.0-9e]{2,}|\(.*")  # an error message without names and numbers


# --- the property ---

def load_or_refuse(source, **kwargs):
    """Load; on rd.URDFError return it, else check the model's dynamics and return the model."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            model = rd.load_urdf(source, **kwargs)
        except rd.URDFError as error:
            assert str(error), "empty error message"
            event("refused: " + GIST.sub("", str(error))[:50])
            return error
    event("loaded")
    check_dynamics(model)
    return model


def random_state(model, rng):
    """q uniform in the limits intersected with [-pi, pi] (or at the nearer limit), v, a, tau."""
    lo, hi = np.maximum(model.lower, -np.pi), np.minimum(model.upper, np.pi)
    q = np.where(lo < hi, rng.uniform(np.minimum(lo, hi), np.maximum(lo, hi)),
                 np.where(model.lower > np.pi, model.lower, model.upper))
    return q, *rng.uniform(-1, 1, (3, model.nv))


def check_dynamics(model, seed=0):
    """rnea, g, M, forward dynamics finite at a random state; M symmetric positive definite."""
    q, v, a, tau = random_state(model, np.random.default_rng(seed))
    M = rd.mass_matrix(model, q)
    for name, value in (("rnea", rd.rnea(model, q, v, a)), ("gravity", rd.gravity(model, q)),
                        ("M", M), ("forward_dynamics", rd.forward_dynamics(model, q, v, tau))):
        assert np.all(np.isfinite(value)), f"{name} is not finite at q={q}"
    assert np.array_equal(M, M.T), "M is not symmetric"
    np.linalg.cholesky(M)  # LinAlgError if M is not positive definite


def names_in(xml):
    """Names of the links and joints of a document."""
    try:
        robot = ET.fromstring(xml)
    except ET.ParseError:
        return set()
    return {e.get("name") for e in robot if e.tag in ("link", "joint") and e.get("name")}


def assert_named(error, names):
    """The message names one of `names` (quoted, as the loader writes them) or the document."""
    message = str(error)
    assert DOCUMENT_LEVEL.search(message) or any(f"'{n}'" in message for n in names), message


# --- strategies ---

WEIRD_NUMBERS = ["nan", "NaN", "inf", "-inf", "Infinity", "1e999", "-1e999", "", " ", "0x10",
                 "0x1p3", "1,5", "--1", "1e", ".", "+", "1_000", "\u0663", "0", "-0", "1e-320",
                 "1e-300", "-1e-300", "1e300", "-1e300", "1e200", "1e150", "1e12", "-1e12",
                 "1e9", "-1e9", "1", "-1", "0.5", "2e-8", "1e-12"]
plausible = st.floats(-3, 3).map(repr)
number = st.one_of(plausible, plausible, st.sampled_from(WEIRD_NUMBERS),
                   st.floats(allow_nan=True, allow_infinity=True).map(repr))
xml_text = st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), max_size=8)
JOINT_TYPES = ["revolute", "continuous", "prismatic", "fixed", "floating", "planar", "hinge", "",
               "REVOLUTE", "revolute ", "\u00e9"]
NUMERIC = {"origin": ("xyz", "rpy"), "axis": ("xyz",), "mass": ("value",),
           "inertia": ("ixx", "ixy", "ixz", "iyy", "iyz", "izz"),
           "limit": ("lower", "upper", "effort", "velocity")}
SIZES = {"xyz": 3, "rpy": 3}


def numbers_for(attribute):
    """Right count of numbers most of the time, else 0 to 4."""
    right = st.lists(number, min_size=SIZES.get(attribute, 1), max_size=SIZES.get(attribute, 1))
    return st.one_of(right, right, right, st.lists(number, max_size=4)).map(" ".join)


def pick(draw, robot, tags):
    elements = [e for e in robot.iter() if e.tag in tags]
    return draw(st.sampled_from(elements)) if elements else None


def set_number(draw, robot):
    element = pick(draw, robot, NUMERIC)
    if element is not None:
        attribute = draw(st.sampled_from(NUMERIC[element.tag]))
        element.set(attribute, draw(numbers_for(attribute)))


def set_inertia(draw, robot):
    """Six arbitrary moments and products (mostly not positive definite), or a scaled copy."""
    element = pick(draw, robot, {"inertia"})
    if element is None:
        return
    scale = 10.0 ** draw(st.integers(-40, 12))
    for key in NUMERIC["inertia"]:
        old = element.get(key, "0")
        old = float(old) * scale if re.fullmatch(r"[-+0-9.e]+", old) else 1.0
        element.set(key, repr(draw(st.one_of(st.floats(-1, 1), st.just(old)))))


def set_mass(draw, robot):
    element = pick(draw, robot, {"mass"})
    if element is not None:
        element.set("value", draw(st.sampled_from(
            ["0", "-1", "1e-300", "1e-30", "1e-12", "1e6", "1e9", "1e12", "1e300"])))


def set_type(draw, robot):
    element = pick(draw, robot, {"joint"})
    if element is not None:
        element.set("type", draw(st.sampled_from(JOINT_TYPES)))


def set_name(draw, robot):
    element = pick(draw, robot, {"link", "joint", "parent", "child"})
    links = [e.get("name") for e in robot.findall("link") if e.get("name")] or ["x"]
    if element is not None:
        key = "name" if element.tag in ("link", "joint") else "link"
        element.set(key, draw(st.one_of(st.sampled_from(links), xml_text)))


def delete_attribute(draw, robot):
    element = pick(draw, robot, set(NUMERIC) | {"link", "joint", "parent", "child"})
    if element is not None and element.attrib:
        del element.attrib[draw(st.sampled_from(sorted(element.attrib)))]


def delete_element(draw, robot):
    pairs = [(parent, child) for parent in robot.iter() for child in parent]
    if pairs:
        parent, child = draw(st.sampled_from(pairs))
        parent.remove(child)


def duplicate_element(draw, robot):
    element = pick(draw, robot, {"link", "joint"})
    if element is not None:
        robot.append(copy.deepcopy(element))


def reconnect(draw, robot):
    """Point a joint's parent or child at another link: cycles, two parents, self-loops."""
    element = pick(draw, robot, {"parent", "child"})
    links = [e.get("name") for e in robot.findall("link") if e.get("name")]
    if element is not None and links:
        element.set("link", draw(st.sampled_from(links)))


def add_mimic(draw, robot):
    element = pick(draw, robot, {"joint"})
    if element is not None:
        ET.SubElement(element, "mimic", joint="panda_joint1")


def add_junk(draw, robot):
    element = pick(draw, robot, {"robot", "link", "joint", "inertial"})
    junk = ET.SubElement(element, draw(st.sampled_from(["junk", "origin", "link", "joint"])))
    junk.text = draw(xml_text)


MUTATIONS = [set_number, set_number, set_number, set_inertia, set_mass, set_mass, set_type,
             set_name, delete_attribute, delete_element, duplicate_element, reconnect, add_mimic,
             add_junk]


@st.composite
def mutated(draw):
    """(seed name, a seed URDF with 1 to 3 mutations)."""
    seed = draw(st.sampled_from(sorted(SEEDS)))
    robot = ET.fromstring(SEEDS[seed])
    for _ in range(draw(st.sampled_from([1, 1, 1, 2, 3]))):
        draw(st.sampled_from(MUTATIONS))(draw, robot)
    return seed, ET.tostring(robot, encoding="unicode")


@st.composite
def load_arguments(draw, xml, default):
    """Base and tip: the seed's usual ones, any name, a made-up one or None; gravity at times.

    The gravity vector then has any length and any values (NaN, inf).
    """
    names = sorted(names_in(xml)) or ["x"]
    choice = st.one_of(st.none(), st.sampled_from(names), st.sampled_from(names), xml_text)
    kwargs = draw(st.one_of(st.just(default), st.just(default),
                            st.fixed_dictionaries(dict(base=choice, tip=choice))))
    if draw(st.integers(0, 9)) == 0:
        kwargs = kwargs | dict(gravity=draw(st.lists(st.floats(), min_size=2, max_size=4)))
    return kwargs


def _vector(rng, scale=1.0):
    return " ".join(repr(float(x)) for x in rng.uniform(-scale, scale, 3))


def random_inertial(kind, exponent, rng):
    """An <inertial> of mass ~ 10^exponent kg, or none.

    Physical (moments s2+s3, s1+s3, s1+s2 with s > 0), a point mass, or physical plus a
    symmetric error of relative size 10^-3..10^-12 (often not positive definite); the centre of
    mass at the link origin half of the time.
    """
    if kind == "none":
        return ""
    scale = 10.0 ** exponent
    s = rng.uniform(1e-3, 1, 3) * scale * (kind != "point")
    inertia = np.diag(s.sum() - s)
    if kind == "perturbed":
        error = rng.normal(size=(3, 3)) * scale * 10.0 ** rng.integers(-12, -2)
        inertia += error + error.T
    ixx, iyy, izz, ixy, ixz, iyz = (repr(float(x)) for x in inertia[[0, 1, 2, 0, 0, 1],
                                                                    [0, 1, 2, 1, 2, 2]])
    com = _vector(rng, 0.3) if rng.random() < 0.5 else "0 0 0"
    return (f'<inertial><origin xyz="{com}" rpy="{_vector(rng, 3)}"/><mass value='
            f'"{scale * rng.uniform(0.1, 10)!r}"/><inertia ixx="{ixx}" iyy="{iyy}" izz="{izz}" '
            f'ixy="{ixy}" ixz="{ixz}" iyz="{iyz}"/></inertial>')


def random_joint(i, kind, parent, rng):
    """Joint j<i> from link l<parent> to link l<i>, random origin, axis and limits."""
    lower = rng.uniform(-3, 0.5)
    return (f'<joint name="j{i}" type="{kind}"><parent link="l{parent}"/><child link="l{i}"/>'
            f'<origin xyz="{_vector(rng, 0.5)}" rpy="{_vector(rng, 3)}"/>'
            f'<axis xyz="{_vector(rng)}"/><limit lower="{lower!r}" upper="{lower + 2!r}" '
            'effort="10" velocity="1"/></joint>')


@st.composite
def generated(draw):
    """A tree written from scratch, then 0 to 2 mutations.

    Links l0..l<n-1>; link i's parent is an earlier link, or (a quarter of the documents) any
    link: cycles, self-loops, several roots. Masses span 10^-30..10^9 kg; some links are point
    masses (zero inertia) or have no inertial. Numbers come from a seeded generator; hypothesis
    draws the structure, the scales and the mutations.
    """
    n = draw(st.integers(2, 12))
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    parents = draw(st.lists(st.integers(0, n - 1), min_size=n - 1, max_size=n - 1))
    if draw(st.integers(0, 3)):
        parents = [p % i for i, p in enumerate(parents, start=1)]
    kinds = draw(st.lists(st.sampled_from(["revolute", "continuous", "prismatic", "fixed"]),
                          min_size=n - 1, max_size=n - 1))
    kind = st.sampled_from(["physical"] * 5 + ["none", "point", "perturbed"])
    exponent = st.sampled_from([0] * 8 + [-30, -12, -6, -3, 3, 6, 9])
    masses = draw(st.lists(st.tuples(kind, exponent), min_size=n, max_size=n))
    parts = [f'<link name="l{i}">{random_inertial(kind, exponent, rng)}</link>'
             for i, (kind, exponent) in enumerate(masses)]
    parts += [random_joint(i, kind, parent, rng)
              for i, (kind, parent) in enumerate(zip(kinds, parents), start=1)]
    robot = ET.fromstring(f'<robot name="generated">{"".join(parts)}</robot>')
    for _ in range(draw(st.sampled_from([0, 0, 1, 2]))):
        draw(st.sampled_from(MUTATIONS))(draw, robot)
    return ET.tostring(robot, encoding="unicode")


# --- the properties ---

@pytest.mark.timeout(120)
@FUZZ
@given(st.data())
def test_mutated_urdfs_load_or_refuse_by_name(data):
    seed, xml = data.draw(mutated())
    kwargs = data.draw(load_arguments(xml, DEFAULT_KWARGS.get(seed, {})))
    outcome = load_or_refuse(xml, **kwargs)
    if isinstance(outcome, rd.URDFError):
        assert_named(outcome, names_in(xml) | {kwargs.get("base"), kwargs.get("tip")})


@pytest.mark.timeout(120)
@FUZZ
@given(generated(), st.data())
def test_generated_urdfs_load_or_refuse_by_name(xml, data):
    links = sorted(e.get("name") for e in ET.fromstring(xml).iter("link") if e.get("name"))
    tip = data.draw(st.one_of(st.none(), st.sampled_from(links or ["l0"])))
    outcome = load_or_refuse(xml, tip=tip)
    if isinstance(outcome, rd.URDFError):
        assert_named(outcome, names_in(xml) | {tip})


ARM = SEEDS["tree3"]


@pytest.mark.timeout(120)
@FUZZ
@given(st.data())
def test_bad_number_is_refused_by_the_name_of_its_link_or_joint(data):
    """One number of a random tree replaced: a refusal names the link or joint holding it."""
    robot = ET.fromstring(ARM)
    holders = {e: owner for owner in robot for e in owner.iter()}
    element = pick(data.draw, robot, NUMERIC)
    attribute = data.draw(st.sampled_from(NUMERIC[element.tag]))
    element.set(attribute, data.draw(numbers_for(attribute)))
    owner = holders[element]
    outcome = load_or_refuse(ET.tostring(robot, encoding="unicode"))
    if isinstance(outcome, rd.URDFError):
        assert_named(outcome, {owner.get("name")} | carriers(robot, owner))


def carriers(robot, owner):
    """The joints that move a link, or a joint and its child link (they are named instead)."""
    by_child = {j.find("child").get("link"): j for j in robot.findall("joint")}
    link = owner.find("child").get("link") if owner.tag == "joint" else owner.get("name")
    names = {link}
    while link in by_child:
        joint = by_child[link]
        names.add(joint.get("name"))
        link = joint.find("parent").get("link")
    return names


@pytest.mark.timeout(120)
@FUZZ
@given(st.one_of(st.binary(max_size=300), st.binary(max_size=300).map(lambda b: b"<robot>" + b),
                 st.text(max_size=300).map(lambda t: "<robot>" + t),
                 st.text(max_size=300).map(lambda t: "<" + t)))
def test_random_bytes_and_text_are_refused(document):
    outcome = load_or_refuse(document)
    assert isinstance(outcome, rd.URDFError)


# --- every failure mode found, pinned by an example -----------------------------------------------

INERTIA = '<inertia ixx="0.02" ixy="0" ixz="0" iyy="0.03" iyz="0" izz="0.04"/>'
POINT = '<inertia ixx="0" ixy="0" ixz="0" iyy="0" iyz="0" izz="0"/>'


def link(name, mass="1.0", com="0.1 0 0.05", inertia=INERTIA):
    return (f'<link name="{name}"><inertial><origin xyz="{com}"/><mass value="{mass}"/>'
            f'{inertia}</inertial></link>')


def joint(name, kind, parent, child, xyz="0 0 0.3", axis="0 0 1", limit="-2 2"):
    lower, upper = limit.split()
    return (f'<joint name="{name}" type="{kind}"><parent link="{parent}"/><child link="{child}"/>'
            f'<origin xyz="{xyz}"/><axis xyz="{axis}"/>'
            f'<limit lower="{lower}" upper="{upper}" effort="10" velocity="1"/></joint>')


def robot(*parts):
    return '<robot name="r"><link name="base"/>' + "".join(parts) + "</robot>"


ARM2 = robot(link("l1"), joint("j1", "revolute", "base", "l1"),
             link("l2"), joint("j2", "revolute", "l1", "l2", axis="0 1 0"))


def chain(n):
    """n revolute joints alternating y and z axes, 1 cm apart."""
    return robot(*(link(f"l{i}", com="0.05 0 0.02") + joint(
        f"j{i}", "revolute", f"l{i - 1}" if i > 1 else "base", f"l{i}", xyz="0 0 0.01",
        axis="0 1 0" if i % 2 else "0 0 1") for i in range(1, n + 1)))


def refused(source, pattern, **kwargs):
    """Assert rd.URDFError matching pattern, within a second (no hang, no expansion)."""
    start = time.perf_counter()
    with pytest.raises(rd.URDFError, match=pattern):
        rd.load_urdf(source, **kwargs)
    assert time.perf_counter() - start < 1.0


LAUGHS = "".join(f'<!ENTITY l{i} "' + f"&l{i - 1};" * 10 + '">' for i in range(1, 10))


@pytest.mark.timeout(30)
@pytest.mark.parametrize("dtd", [
    f'<!ENTITY l0 "lol">{LAUGHS}',                       # billion laughs: 10^9 expansions
    '<!ENTITY a "' + "x" * 100_000 + '">',                # quadratic blow-up
    '<!ENTITY e SYSTEM "file:///etc/hostname">',          # external entity: reads a file
    "",                                                   # any DTD at all
], ids=["billion-laughs", "quadratic", "external", "empty"])
def test_dtd_is_refused_before_any_entity_expands(dtd):
    body = "&l9;" if "l9" in dtd else "&a;" * 1000 if '"x' in dtd else "&e;" if "SYSTEM" in dtd \
        else ""
    refused(f'<?xml version="1.0"?><!DOCTYPE robot [{dtd}]><robot name="r">{body}'
            '<link name="a"/></robot>', r"DOCTYPE")


def test_document_may_be_bytes_in_any_declared_encoding():
    """Was a TypeError; a declared Latin-1 document now loads, names decoded."""
    q = np.array([0.3, -0.7])
    expected = rd.mass_matrix(rd.load_urdf(ARM2), q)
    np.testing.assert_array_equal(rd.mass_matrix(rd.load_urdf(ARM2.encode()), q), expected)
    latin = ('<?xml version="1.0" encoding="ISO-8859-1"?>' + ARM2.replace('"l2"', '"\u00e9"'))
    model = rd.load_urdf(latin.encode("latin-1"))
    assert "\u00e9" in model.frame_names
    np.testing.assert_array_equal(rd.mass_matrix(model, q), expected)


@pytest.mark.timeout(30)
def test_unreadable_sources_are_refused_without_blocking(tmp_path):
    """A FIFO blocked forever, /dev/zero ate all memory, a NUL byte raised a plain ValueError."""
    fifo = tmp_path / "fifo.urdf"
    os.mkfifo(fifo)
    for source in (fifo, "/dev/zero", tmp_path, "robot\x00.urdf", tmp_path / "missing.urdf",
                   "x" * 5000):
        refused(source, r"cannot read URDF file")


@pytest.mark.parametrize("document, pattern", [
    (ARM2.replace('name="r"', 'name="\ud800"'), r"XML.*surrogates"),  # was UnicodeEncodeError
    (b'<?xml version="1.0" encoding="bogus"?><robot/>', r"XML.*encoding"),  # was LookupError
    (b'<?xml version="1.0" encoding="shift_jis"?><robot/>', r"XML.*multi-byte"),
    (b"\x89PNG\r\n\x1a\n\x00\x00", r"XML"),
])
def test_undecodable_documents_are_refused(document, pattern):
    refused(document, pattern)


@pytest.mark.parametrize("source", [None, 3, ["<robot/>"]])
def test_a_source_of_the_wrong_type_is_a_type_error(source):
    with pytest.raises(TypeError, match=r"path or an XML document"):
        rd.load_urdf(source)


@pytest.mark.parametrize("old, new, pattern", [
    ('xyz="0 0 0.3"', 'xyz="1e200 0 0.3"', r"joint 'j1'.*xyz.*out of range"),
    ('value="1.0"', 'value="1e300"', r"link 'l1' mass.*out of range"),
    ('xyz="0.1 0 0.05"', 'xyz="1e160 0 0"', r"link 'l1' inertial origin.*out of range"),
    ('<axis xyz="0 0 1"/>', '<axis xyz="1e200 1e200 0"/>', r"joint 'j1' axis.*out of range"),
    ('upper="2"', 'upper="-1e200"', r"joint 'j1' limit.*out of range"),   # -1e200: no limit
    ('value="1.0"', 'value="1_0"', r"link 'l1' mass.*decimal"),          # Python's float took it
    ('value="1.0"', 'value="\u0661"', r"link 'l1' mass.*decimal"),       # an Arabic-Indic 1
    ('value="1.0"', 'value="0x1p0"', r"link 'l1' mass.*decimal"),
    ('value="1.0"', 'value="infinity"', r"link 'l1' mass.*decimal"),
    ('value="1.0"', 'value="1e999"', r"link 'l1' mass.*out of range"),
    ('xyz="0 0 0.3"', 'xyz="0 0"', r"joint 'j1'.*xyz.*3 decimal"),
])
def test_numbers_must_be_plain_decimals_within_range(old, new, pattern):
    """Huge numbers loaded and gave inf/NaN dynamics or a non-PD M; exotic spellings loaded."""
    refused(ARM2.replace(old, new, 1), pattern)


def test_long_values_are_shortened_in_messages():
    with pytest.raises(rd.URDFError) as error:
        rd.load_urdf(ARM2.replace('xyz="0 0 0.3"', 'xyz="' + "1 " * 500_000 + '"', 1))
    assert "joint 'j1'" in str(error.value) and len(str(error.value)) < 300


@pytest.mark.filterwarnings("ignore:link 'm'")
@pytest.mark.parametrize("parts, pattern", [
    # a point mass on the axis of the last joint: M[1, 1] = 0
    ((link("l1"), joint("j1", "revolute", "base", "l1"),
      link("l2", com="0 0 0", inertia=POINT), joint("j2", "revolute", "l1", "l2")), r"'j2'"),
    # a massless link between two joints on one axis: j1 only turns what j2 turns freely
    (('<link name="m"/>', joint("j1", "revolute", "base", "m"),
      link("l2"), joint("j2", "revolute", "m", "l2", xyz="0 0 0")), r"'j1'"),
    # a denormal mass on a prismatic joint: forward dynamics was inf
    ((link("l1"), joint("j1", "revolute", "base", "l1"),
      link("l2", mass="1e-320"), joint("j2", "prismatic", "l1", "l2")), r"'j2'.*kg "),
    # found by the fuzzing: a 7 kg point mass on the axis and a 1e-30 kg link fixed to it; M's
    # diagonal was round-off (1e-17) of either sign
    ((link("l1", mass="7", com="0 0 0", inertia=POINT), joint("j1", "revolute", "base", "l1"),
      link("dust", mass="5e-30", com="0 0 0", inertia=INERTIA.replace('"0.0', '"0.0e-28')),
      joint("f", "fixed", "l1", "dust", xyz="0 0.4 0")), r"'j1'"),
])
def test_singular_mass_matrix_is_refused_by_joint(parts, pattern):
    """These loaded, and forward dynamics then failed (M not PD) or returned inf."""
    refused(robot(*parts), pattern + r".*singular")


def test_slightly_negative_inertia_of_a_light_link_is_refused():
    """The tolerance was 1e-9 kg m^2 absolute: this 1e-10-scale tensor passed as PSD."""
    bad = '<inertia ixx="-5e-10" ixy="0" ixz="0" iyy="1e-10" iyz="0" izz="1e-10"/>'
    refused(ARM2.replace(INERTIA, bad, 1), r"link 'l1' inertia is not positive")


@pytest.mark.parametrize("xml, kwargs, pattern", [
    (robot(link("l1"), joint("j1", "fixed", "base", "l1")), {}, r"no moving joint.*'base'"),
    (ARM2, dict(tip="base"), r"no moving joint.*'base'.*tip link 'base'"),
    (ARM2, dict(base="l1", tip="l1"), r"no moving joint.*'l1'"),
])
def test_a_model_without_degree_of_freedom_is_refused(xml, kwargs, pattern):
    """Was numpy's 'cannot reshape array of size 0'."""
    refused(xml, pattern, **kwargs)


@pytest.mark.timeout(30)
def test_cycle_through_the_given_base_is_refused():
    """With base given the cycle check was skipped, and building the tree looped forever."""
    xml = robot(link("a"), link("b"), joint("ja", "revolute", "a", "b"),
                joint("jb", "revolute", "b", "a"))
    refused(xml, r"cycle through link '[ab]'", base="a")


@pytest.mark.parametrize("gravity", [(0, -9.81), None, "down", (0, 0, float("nan")),
                                     (0, 0, 1e300), np.zeros((3, 1))])
def test_gravity_must_be_three_finite_numbers(gravity):
    """Was numpy's 'cannot reshape' for a wrong shape."""
    refused(ARM2, r"gravity must be 3 finite numbers", gravity=gravity)


@pytest.mark.parametrize("kwargs", [dict(base=["base"]), dict(tip=3)])
def test_base_and_tip_must_be_link_names(kwargs):
    """A list was 'unhashable type'."""
    with pytest.raises(TypeError, match=r"(base|tip) must be a link name"):
        rd.load_urdf(ARM2, **kwargs)


def test_nameless_link_or_joint_is_numbered():
    refused(ARM2.replace('<link name="l2">', "<link>"), r"<link> number 3 .*no name")
    refused(ARM2.replace('<joint name="j2"', "<joint"), r"<joint> number 2 .*no name")


@pytest.mark.timeout(60)
def test_five_megabytes_of_whitespace_and_comments_load_fast():
    padding = (" \n\t" * 300_000 + "<!-- " + "comment " * 100_000 + "-->") * 2
    xml = ARM2.replace("<link", padding + "<link")
    assert len(xml) > 5_000_000
    start = time.perf_counter()
    model = rd.load_urdf(xml)
    assert time.perf_counter() - start < 15.0  # about 0.5 s
    q = np.array([0.3, -0.7])
    np.testing.assert_array_equal(rd.mass_matrix(model, q),
                                  rd.mass_matrix(rd.load_urdf(ARM2), q))


@pytest.mark.timeout(60)
def test_cycle_search_is_linear_in_the_number_of_links():
    """It walked up from every link: O(n^2), about a minute for this 10000-link loop."""
    links = ['<link name="l0"/>'] + [
        f'<link name="l{i}"/><joint name="j{i}" type="fixed"><parent link="l{i - 1}"/>'
        f'<child link="l{i}"/></joint>' for i in range(1, 10_000)]
    loop = '<joint name="loop" type="fixed"><parent link="l9999"/><child link="l0"/></joint>'
    start = time.perf_counter()
    with pytest.raises(rd.URDFError, match=r"cycle through link 'l0' \(joint 'loop'\)"):
        rd.load_urdf(f'<robot name="r">{"".join(links)}{loop}</robot>')
    assert time.perf_counter() - start < 15.0  # about 1 s; generous for a busy CI machine


@pytest.mark.timeout(120)
def test_3000_link_chain_loads_without_recursion():
    model = rd.load_urdf(chain(3000))
    assert model.nv == 3000
    q = np.random.default_rng(0).uniform(-1, 1, model.nv)
    tau = rd.rnea(model, q, np.zeros(model.nv), np.zeros(model.nv))
    np.testing.assert_allclose(rd.gravity(model, q), tau)
    assert np.all(np.isfinite(tau))


def test_deeply_nested_unknown_elements_are_ignored():
    nested = "<extra>" * 100_000 + "</extra>" * 100_000
    model = rd.load_urdf(ARM2.replace("</link>", nested + "</link>", 1))
    assert model.joint_names == ("j1", "j2")


@pytest.mark.parametrize("seed", range(4))
def test_singularity_check_computes_the_pivots_of_the_mass_matrix(seed):
    """The loader's articulated pivots D_i are those of M = U D U^T, leaves eliminated first.

    That is the squared diagonal of the Cholesky factor of M with rows and columns reversed.
    """
    from robot_dynamics.core.algorithms.pivots import articulated_pivots
    model = rd.load_urdf(random_urdf(seed, 8))
    q0 = np.clip(np.zeros(model.nv), model.lower, model.upper)
    pivots, _ = articulated_pivots(model, q0)
    M = rd.mass_matrix(model, q0)
    expected = np.diag(np.linalg.cholesky(M[::-1, ::-1]))[::-1] ** 2
    np.testing.assert_allclose(pivots, expected, rtol=1e-10)
