/* Counts over a vote's text that the vote index takes per vote, compiled (webui.leaderboard.stats.style).
 *
 * word_count(text) -> int: len(text.split()), without a string per word. A word is a maximal run
 * of characters that str.split() does not take for whitespace (Py_UNICODE_ISSPACE, the test it
 * uses), for any text, ASCII or not.
 *
 * Built where a C compiler is (setup.py, optional); style.py falls back to its Python version
 * elsewhere, and tests/unit/leaderboard/votes/test_leaderboard_fast_paths.py checks that both agree.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

static unsigned char is_word[256]; /* 1 where str.split() does not split (Py_UNICODE_ISSPACE) */

static PyObject *
word_count(PyObject *module, PyObject *text)
{
    if (!PyUnicode_Check(text)) {
        PyErr_SetString(PyExc_TypeError, "word_count: the text must be a str");
        return NULL;
    }
#if PY_VERSION_HEX < 0x030C0000 /* 3.12 made every str ready, and deprecated the call */
    if (PyUnicode_READY(text) < 0)
        return NULL;
#endif
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    Py_ssize_t size = PyUnicode_GET_LENGTH(text), words = 0;
    int in_word = 0;
    if (kind == PyUnicode_1BYTE_KIND) { /* the common case: a table, no test per character */
        const Py_UCS1 *chars = data;
        for (Py_ssize_t i = 0; i < size; i++) {
            int word = is_word[chars[i]];
            words += word & ~in_word;
            in_word = word;
        }
    } else {
        for (Py_ssize_t i = 0; i < size; i++) {
            int space = Py_UNICODE_ISSPACE(PyUnicode_READ(kind, data, i));
            words += !space && !in_word;
            in_word = !space;
        }
    }
    return PyLong_FromSsize_t(words);
}

static PyMethodDef methods[] = {
    {"word_count", word_count, METH_O, "word_count(text: str) -> int: len(text.split())."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "_counts", "Counts over a vote's text, compiled.", -1, methods,
};

PyMODINIT_FUNC
PyInit__counts(void)
{
    for (int c = 0; c < 256; c++)
        is_word[c] = !Py_UNICODE_ISSPACE(c);
    return PyModule_Create(&module_def);
}
