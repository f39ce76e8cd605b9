"""The Spanish edition reads as one text: one register (the neutral "tú"), one term per concept
(tfcourse/locale/glossary-es.yaml), sentences that start with a capital, and the stubs' docstrings
in Spanish. Every Spanish text of the course is read: the notebooks' prose, the docstrings' catalog
(source/docstrings.es.yaml), and the messages of the engine and of the hidden graders."""
import ast
import inspect
import re

import pytest
import yaml

from tfcourse import notebook
from tfcourse.build.language import docstring_catalog, select_language, translate_docstrings

from conftest import NOTEBOOK_OF, ROOT

GLOSSARY = yaml.safe_load((ROOT / "tfcourse" / "locale" / "glossary-es.yaml").read_text("utf-8"))
CODE = re.compile(r"```.*?```|`[^`\n]*`|\$\$.*?\$\$|\$[^$\n]*\$|<[^>\n]*>|\{[^{}\n]*\}", re.S)


def prose(text: str) -> str:
    """`text` with code, formulas, HTML tags and message placeholders each replaced by "X": the
    words a reader reads as Spanish."""
    return CODE.sub("X", text)


def _catalog(path):
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def spanish_texts() -> dict[str, str]:
    """Where -> a Spanish text, for every Spanish text of the course."""
    texts = {}
    for assignment, name in NOTEBOOK_OF.items():
        nb = notebook.read(ROOT / "source" / assignment / name)
        for index, cell in enumerate(nb.cells):
            if notebook.lang(cell) == "es":
                texts[f"{assignment} cell {index}"] = notebook.text(cell)
    for english, spanish in _catalog(ROOT / "source" / "docstrings.es.yaml").items():
        texts[f"docstring {english[:40]!r}"] = spanish
    for folder in ("tfcourse", "autograder", "visible"):
        for english, spanish in _catalog(ROOT / folder / "locale" / "es.yaml").items():
            texts[f"{folder}/locale/es.yaml {str(english)[:50]!r}"] = str(spanish)
    return texts


def _word(pattern: str) -> re.Pattern:
    return re.compile(rf"(?<![\w-])(?:{pattern})(?![\w-])", re.I)


def banned_variants(text: str) -> list[str]:
    words = prose(text)
    found = []
    for concept, term in GLOSSARY["terms"].items():
        for variant in term.get("not") or []:
            found += [f"{match.group(0)!r} (say {term['es']!r} for {concept})"
                      for match in _word(variant).finditer(words)]
    return found


def vos_forms(text: str) -> list[str]:
    words, vos = prose(text), GLOSSARY["vos"]
    allowed = {word.lower() for word in vos["allowed"]}
    found = [match.group(0) for pattern in vos["words"] for match in _word(pattern).finditer(words)]
    found += [match.group(0) for pattern in vos["endings"]
              for match in _word(pattern).finditer(words) if match.group(0).lower() not in allowed]
    return found


TEXTS = spanish_texts()


def test_the_texts_are_read():
    assert len(TEXTS) > 300
    assert sum(where.startswith("0") for where in TEXTS) >= 35


def test_one_term_per_concept():
    found = [f"{where}: {hit}" for where, text in TEXTS.items() for hit in banned_variants(text)]
    assert not found, "a variant where the glossary has one term:\n" + "\n".join(found)


def test_one_register_the_neutral_tu():
    found = [f"{where}: {hit!r}" for where, text in TEXTS.items() for hit in vos_forms(text)]
    assert not found, "'vos' forms in the Spanish edition:\n" + "\n".join(found)


@pytest.mark.parametrize("text, hits", [
    ("Dentro de `forward`, llamá a la función y pasás sus argumentos.", ["llamá", "pasás"]),
    ("Si le pasás más argumentos, sacale el último eje y usalos.", ["pasás", "sacale", "usalos"]),
    ("Tomá $0 \\log 0 = 0$; corré el encoder una vez y escribí la atención vos mismo.",
     ["Tomá", "corré", "escribí", "vos"]),
    ("Escribe la función, ejecútala y verás que la máscara está bien aquí; después, más.", []),
    ("`llamá()` en el código no cuenta.", []),
])
def test_vos_forms_are_found(text, hits):
    assert sorted(vos_forms(text)) == sorted(hits)


def test_banned_variants_are_found():
    assert sorted(banned_variants("Los tests ocultos miran un lote chico con padding.")) == [
        "'chico' (say 'pequeño' for small)", "'con padding' (say 'relleno' for padding)",
        "'tests ocultos' (say 'comprobaciones ocultas' for hidden checks)"]
    assert banned_variants("Las comprobaciones ocultas van a lo largo de las columnas.") == []
    assert banned_variants("Una secuencia de largo 10.") != []
    assert banned_variants("Suma la entrada antes de la norma; presiona el botón.") == [
        "'la norma' (say 'LayerNorm' for LayerNorm (the layer))",
        "'presiona' (say 'pulsa' for press (a button))"]
    assert banned_variants("Su norma al cuadrado es 32; pulsa el botón.") == []
    assert banned_variants("Un pooling por promedio.") != []
    assert banned_variants("3. resumen (en inglés, *pooling*): el promedio") == []


def test_pooling_is_glossed_once_where_the_resumen_is_introduced():
    """"resumen" stands for the pooled vector; the English word is given once, at the first
    "resumen" of the assignment that introduces it (02's classifier), and nowhere else."""
    glossed = [where for where, text in TEXTS.items() if "resumen (en inglés, *pooling*)" in text]
    assert len(glossed) == 1 and glossed[0].startswith("02-layers"), glossed
    noun = re.compile(r"(?<![\w-])(?<!se )resumen(?![\w-])")    # not the verb, "se resumen"
    text = prose(TEXTS[glossed[0]])
    assert text[noun.search(text).start():].startswith("resumen (en inglés, *pooling*)")
    earlier = [where for where, text in TEXTS.items() if where.startswith("02-layers")
               and int(where.split()[-1]) < int(glossed[0].split()[-1])
               and noun.search(prose(text))]
    assert not earlier, earlier


# A full stop (not one closing a list item's number, "3.") and a lower-case word after it.
SENTENCE_END = re.compile(r"(?<![\d\s])[.!?]\s+(?=[a-záéíóúñ]+[\s,;])")


def lower_case_starts(text: str) -> list[str]:
    words = prose(text).strip()
    found = [words[match.end():match.end() + 25] for match in SENTENCE_END.finditer(words)]
    if words[:1].islower():
        found.append(words[:25])
    return found


def test_sentences_start_with_a_capital_in_the_notebooks_and_docstrings():
    found = [f"{where}: {hit!r}" for where, text in TEXTS.items()
             if not where.split()[0].endswith("es.yaml")
             for hit in lower_case_starts(text.replace("\n", " "))]
    assert not found, "\n".join(found)


def test_messages_start_as_their_english_does():
    """A message whose English starts with a capital, or with a placeholder such as "{passed} of
    {total} visible checks pass", starts with a capital in Spanish (not "pasan 1 de 3 ...")."""
    found = []
    for folder in ("tfcourse", "autograder", "visible"):
        for english, spanish in _catalog(ROOT / folder / "locale" / "es.yaml").items():
            english, spanish = str(english), str(spanish)
            if (english[:1].isupper() or english[:1] == "{") and spanish[:1].islower():
                found.append(f"{folder}: {spanish[:60]!r}")
    assert not found, "\n".join(found)


# -- the stubs' docstrings -------------------------------------------------------------------------
def stub_docstrings():
    for assignment, name in NOTEBOOK_OF.items():
        nb = notebook.read(ROOT / "source" / assignment / name)
        for cell in nb.cells:
            if notebook.is_solution(cell):
                tree = ast.parse(notebook.strip_solution_markers(notebook.text(cell)))
                for node in ast.walk(tree):
                    if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and \
                            ast.get_docstring(node):
                        yield assignment, node.name, ast.get_docstring(node)


def test_every_stub_docstring_has_its_spanish():
    catalog = docstring_catalog(ROOT, "es")
    docstrings = list(stub_docstrings())
    assert len(docstrings) >= 14
    missing = [f"{assignment}: {name}" for assignment, name, text in docstrings
               if inspect.cleandoc(text) not in catalog]
    assert not missing, "no Spanish for the docstring of:\n" + "\n".join(missing)


@pytest.mark.parametrize("assignment", list(NOTEBOOK_OF))
def test_the_spanish_edition_has_spanish_docstrings(assignment):
    nb = select_language(notebook.read(ROOT / "source" / assignment / NOTEBOOK_OF[assignment]),
                         "es", ROOT)
    english = {inspect.cleandoc(text) for _, _, text in stub_docstrings()}
    spanish = set(docstring_catalog(ROOT, "es").values())
    seen = 0
    for cell in nb.cells:
        if notebook.is_solution(cell):
            tree = ast.parse(notebook.strip_solution_markers(notebook.text(cell)))
            for node in ast.walk(tree):
                if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and ast.get_docstring(node):
                    assert ast.get_docstring(node) not in english, node.name
                    assert ast.get_docstring(node) in spanish, node.name
                    seen += 1
            assert max(len(line) for line in notebook.text(cell).splitlines()) <= 100
    assert seen >= 3


def test_the_english_edition_keeps_its_docstrings():
    path = ROOT / "source" / "01-attention" / "attention.ipynb"
    assert select_language(notebook.read(path), "en", ROOT).cells == [
        cell for cell in notebook.read(path).cells if notebook.lang(cell) in (None, "en")]


def test_a_docstring_is_replaced_at_its_indentation():
    source = ('class A:\n    """One.\n\n    Two.\n    """\n\n    def f(self):\n'
              '        """Three."""\n        return 1\n')
    out = translate_docstrings(source, {"One.\n\nTwo.": "Uno.\n\nDos.", "Three.": "Tres."})
    assert out == ('class A:\n    """Uno.\n\n    Dos.\n    """\n\n    def f(self):\n'
                   '        """Tres."""\n        return 1\n')
    assert translate_docstrings("def f(:\n", {"x": "y"}) == "def f(:\n"
