"""The table "One file name per concept" in sdk/README.md holds: every file it names exists in
its SDK, and each is named after its concept (up to the extension, a Python module's leading
underscore, and the cells marked with a dagger)."""

import os
import re
import unittest

from tools.internal import bazel_unittest


def _root():
    srcdir = os.environ.get("TEST_SRCDIR")
    if srcdir:
        return os.path.join(srcdir, os.environ.get("TEST_WORKSPACE", "ctrlhost"))
    return os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))


ROOT = _root()
# The table's columns after the concept, with the folder each names files in.
FOLDERS = ["sdk/go", "sdk/python/ctrlhost_sdk", "sdk/node/src", "sdk/cpp"]
CONCEPTS = ["chain", "crud", "pass_context", "stage_callbacks", "operator_status",
            "resource_sets", "tasks", "builders", "testing", "host_judgement"]


def table_rows():
    with open(os.path.join(ROOT, "sdk", "README.md")) as f:
        text = f.read()
    section = text.split("## One file name per concept", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 1 + len(FOLDERS) or cells[0] in ("Concept", "---"):
            continue
        rows.append(cells)
    return rows


def stem(path):
    name = os.path.basename(path)
    return name.split(".", 1)[0].lstrip("_")


class ConceptFilesTest(unittest.TestCase):
    def test_every_concept_has_a_row_with_a_file_in_every_sdk(self):
        rows = {cells[0]: cells[1:] for cells in table_rows()}
        for concept in CONCEPTS:
            self.assertIn(concept, rows, "sdk/README.md has no row for " + concept)
            for folder, cell in zip(FOLDERS, rows[concept]):
                self.assertRegex(cell, r"`[^`]+`", "%s has no file in %s" % (concept, folder))

    def test_each_named_file_exists_and_carries_the_concepts_name(self):
        rows = table_rows()
        self.assertGreaterEqual(len(rows), len(CONCEPTS))
        for cells in rows:
            concept = cells[0]
            for folder, cell in zip(FOLDERS, cells[1:]):
                for name in re.findall(r"`([^`]+)`", cell):
                    path = os.path.join(ROOT, folder, name)
                    with self.subTest(concept=concept, file=path):
                        self.assertTrue(os.path.isfile(path), "missing: %s/%s" % (folder, name))
                        if "\u2020" not in cell:
                            self.assertEqual(stem(name), concept,
                                             "%s/%s is not named %s" % (folder, name, concept))


if __name__ == "__main__":
    bazel_unittest.main()
