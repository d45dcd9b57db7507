"""Every JUnit file the tests render is checked against the common JUnit XSD (Jenkins xunit-plugin's junit-10.xsd,
``tests/fixtures/junit/``), and every testcase must carry ``time``: Test Engine shows durations only then."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from functools import cache
from pathlib import Path

import xmlschema

from repo_paths import FIXTURES

XSD = FIXTURES / "junit" / "junit-10.xsd"


@cache
def _schema() -> xmlschema.XMLSchema:
    return xmlschema.XMLSchema(str(XSD))


def assert_valid_junit(path: Path) -> ET.Element:
    """The file's root, after checking it against the XSD and that every testcase has a numeric time."""
    _schema().validate(str(path))
    root = ET.parse(path).getroot()
    for testcase in root.iter("testcase"):
        assert float(testcase.get("time", "missing")) >= 0.0, (path, testcase.get("name"))
    return root
