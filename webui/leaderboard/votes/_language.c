/* The language detector's hot parts, compiled: the ASCII path (webui.leaderboard.votes.language.
 * _latin_language on ASCII text, where most prompts go) and the count of scripts for the rest.
 *
 * AsciiStopWords(stopwords, min_letters, min_stopwords): the stop-word lists ({language: words})
 * made once into a hash table. .language(text) -> str | None, for an ASCII str: its words are the
 * maximal runs of the letters A-Z and a-z, lowered; a word counts for each language whose list
 * holds it. Fewer than `min_letters` letters in all, languages sharing the most stop words, or
 * fewer than `min_stopwords` of them: None; else that language. Stop words with a character
 * outside a-z can match no ASCII word, so they are left out.
 *
 * A word of up to MAX_LETTERS letters is its own key, five bits a letter (A and a both give 1):
 * the scan builds the key as it goes, with no lowered copy, no object per word and no string
 * compare. Longer words are no stop word (the constructor refuses longer stop words).
 *
 * Scripts(ranges): (first code point, last code point, script, letters only) ranges in the BMP made
 * once into a table of a byte per code point. .count(text) -> dict[str, int]: how many characters
 * of each script the text holds, the scripts in the order of their first characters; a range with
 * `letters only` counts only the code points that str.isalpha() takes (Py_UNICODE_ISALPHA, its test).
 *
 * Built where a C compiler is (setup.py, optional); language.py falls back to its Python versions
 * elsewhere, and tests/unit/leaderboard/votes/test_leaderboard_fast_paths.py checks that both agree.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

#define MAX_LETTERS 12 /* 12 letters x 5 bits fit a uint64_t key */
#define MAX_LANGUAGES 32 /* one bit each in a slot's mask */

typedef struct {
    uint64_t key; /* 0: an empty slot (every word has a letter, so no key is 0) */
    uint32_t languages; /* bit i: the i-th language's list holds the word */
} Slot;

typedef struct {
    PyObject_HEAD
    PyObject *names; /* tuple of str: the languages, in the stop-word lists' order */
    Py_ssize_t min_letters, min_stopwords;
    Slot *slots;
    uint64_t mask; /* the number of slots (a power of two) less one */
} AsciiStopWords;

static unsigned char is_letter[256];

static uint64_t
slot_of(uint64_t key, uint64_t mask)
{
    return (key * 0x9E3779B97F4A7C15u >> 32) & mask; /* Fibonacci hashing's spread of the bits */
}

static Slot *
find(const AsciiStopWords *self, uint64_t key)
{
    uint64_t i = slot_of(key, self->mask);
    while (self->slots[i].key != 0 && self->slots[i].key != key)
        i = (i + 1) & self->mask;
    return &self->slots[i];
}

/* The key of `word` if it is a-z only and short enough, else 0 (it can match no ASCII word). */
static uint64_t
key_of(PyObject *word)
{
    if (!PyUnicode_Check(word)) {
        PyErr_SetString(PyExc_TypeError, "AsciiStopWords: every stop word must be a str");
        return 0;
    }
#if PY_VERSION_HEX < 0x030C0000
    if (PyUnicode_READY(word) < 0)
        return 0;
#endif
    Py_ssize_t size = PyUnicode_GET_LENGTH(word);
    if (!PyUnicode_IS_ASCII(word) || size == 0)
        return 0;
    const Py_UCS1 *chars = PyUnicode_1BYTE_DATA(word);
    uint64_t key = 0;
    for (Py_ssize_t i = 0; i < size; i++) {
        if (chars[i] < 'a' || chars[i] > 'z')
            return 0;
        key = key << 5 | (chars[i] & 31);
    }
    if (size > MAX_LETTERS) {
        PyErr_Format(PyExc_ValueError, "AsciiStopWords: the stop word %R is longer than %d letters",
                     word, MAX_LETTERS);
        return 0;
    }
    return key;
}

/* The number of stop words (duplicates and non-ASCII ones included), to size the table. */
static Py_ssize_t
count_words(PyObject *lists)
{
    Py_ssize_t total = 0;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(lists); i++) {
        PyObject *item = PyList_GET_ITEM(lists, i);
        if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 2) {
            PyErr_SetString(PyExc_TypeError, "AsciiStopWords: the stop words must be a mapping");
            return -1;
        }
        Py_ssize_t size = PyObject_Size(PyTuple_GET_ITEM(item, 1));
        if (size < 0)
            return -1;
        total += size;
    }
    return total;
}

static int
add_language(AsciiStopWords *self, PyObject *words, int language)
{
    PyObject *iterator = PyObject_GetIter(words), *word;
    if (iterator == NULL)
        return -1;
    while ((word = PyIter_Next(iterator)) != NULL) {
        uint64_t key = key_of(word);
        Py_DECREF(word);
        if (PyErr_Occurred())
            break;
        if (key != 0) {
            Slot *slot = find(self, key);
            slot->key = key;
            slot->languages |= (uint32_t)1 << language;
        }
    }
    Py_DECREF(iterator);
    return PyErr_Occurred() ? -1 : 0;
}

static int
fill(AsciiStopWords *self, PyObject *stopwords)
{
    PyObject *lists = PyMapping_Items(stopwords);
    if (lists == NULL)
        return -1;
    Py_ssize_t languages = PyList_GET_SIZE(lists), words = count_words(lists), slots = 16;
    int result = -1;
    if (words < 0)
        goto done;
    if (languages > MAX_LANGUAGES) {
        PyErr_Format(PyExc_ValueError, "AsciiStopWords: at most %d languages", MAX_LANGUAGES);
        goto done;
    }
    while (slots < 2 * words) /* at most half full: short probes */
        slots *= 2;
    self->mask = (uint64_t)slots - 1;
    if ((self->slots = PyMem_Calloc((size_t)slots, sizeof(Slot))) == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    if ((self->names = PyTuple_New(languages)) == NULL)
        goto done;
    for (Py_ssize_t i = 0; i < languages; i++) {
        PyObject *item = PyList_GET_ITEM(lists, i), *name = PyTuple_GET_ITEM(item, 0);
        if (!PyUnicode_Check(name)) {
            PyErr_SetString(PyExc_TypeError, "AsciiStopWords: every language must be a str");
            goto done;
        }
        PyTuple_SET_ITEM(self->names, i, Py_NewRef(name));
        if (add_language(self, PyTuple_GET_ITEM(item, 1), (int)i) < 0)
            goto done;
    }
    result = 0;
done:
    Py_DECREF(lists);
    return result;
}

static PyObject *
stopwords_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = {"stopwords", "min_letters", "min_stopwords", NULL};
    PyObject *stopwords;
    Py_ssize_t min_letters, min_stopwords;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "Onn", keywords, &stopwords, &min_letters, &min_stopwords))
        return NULL;
    AsciiStopWords *self = (AsciiStopWords *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->min_letters = min_letters;
    self->min_stopwords = min_stopwords;
    if (fill(self, stopwords) < 0) {
        Py_DECREF(self);
        return NULL;
    }
    return (PyObject *)self;
}

static void
stopwords_dealloc(AsciiStopWords *self)
{
    Py_XDECREF(self->names);
    PyMem_Free(self->slots);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* 0 when `text` is a str ready to read, else -1 with a TypeError naming `who`. */
static int
ready_str(PyObject *text, const char *who)
{
    if (!PyUnicode_Check(text)) {
        PyErr_Format(PyExc_TypeError, "%s: the text must be a str", who);
        return -1;
    }
#if PY_VERSION_HEX < 0x030C0000 /* 3.12 made every str ready, and deprecated the call */
    if (PyUnicode_READY(text) < 0)
        return -1;
#endif
    return 0;
}

static PyObject *
language(AsciiStopWords *self, PyObject *text)
{
    if (ready_str(text, "AsciiStopWords.language") < 0)
        return NULL;
    if (!PyUnicode_IS_ASCII(text)) {
        PyErr_SetString(PyExc_ValueError, "AsciiStopWords.language: the text must be ASCII");
        return NULL;
    }
    const Py_UCS1 *chars = PyUnicode_1BYTE_DATA(text);
    Py_ssize_t size = PyUnicode_GET_LENGTH(text), languages = PyTuple_GET_SIZE(self->names);
    Py_ssize_t letters = 0, length = 0, hits[MAX_LANGUAGES] = {0};
    uint64_t key = 0;
    /* One step past the end, as if a blank followed: the last word ends there like any other. */
    for (Py_ssize_t i = 0; i <= size; i++) {
        if (i < size && is_letter[chars[i]]) {
            key = key << 5 | (chars[i] & 31);
            length++;
            continue;
        }
        if (length == 0)
            continue;
        letters += length;
        if (length <= MAX_LETTERS) {
            uint32_t found = find(self, key)->languages;
            for (Py_ssize_t k = 0; found != 0; k++, found >>= 1)
                hits[k] += found & 1;
        }
        key = 0;
        length = 0;
    }
    if (letters < self->min_letters) /* (every word has a letter: fewer words too) */
        Py_RETURN_NONE;
    Py_ssize_t best = 0, ties = 0;
    for (Py_ssize_t k = 1; k < languages; k++) {
        if (hits[k] > hits[best]) {
            best = k;
            ties = 0;
        } else if (hits[k] == hits[best]) {
            ties++;
        }
    }
    if (languages == 0 || hits[best] < self->min_stopwords || ties > 0)
        Py_RETURN_NONE;
    return Py_NewRef(PyTuple_GET_ITEM(self->names, best));
}

static PyMethodDef stopwords_methods[] = {
    {"language", (PyCFunction)language, METH_O,
     "language(text: str) -> str | None: the language with the most stop words in the ASCII text, "
     "or None (too few letters, too few stop words, or a tie)."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject AsciiStopWordsType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "webui.leaderboard.votes._language.AsciiStopWords",
    .tp_basicsize = sizeof(AsciiStopWords),
    .tp_dealloc = (destructor)stopwords_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "AsciiStopWords(stopwords, min_letters, min_stopwords): stop-word lists made into a "
              "table once, to tell ASCII text's language.",
    .tp_methods = stopwords_methods,
    .tp_new = stopwords_new,
};

#define BMP 0x10000 /* every range ends below it */
#define MAX_SCRIPTS 255 /* a byte per code point: 0 for none, else the script's number plus one */

typedef struct {
    PyObject_HEAD
    PyObject *names; /* tuple of str: the scripts, numbered in the order their ranges come */
    unsigned char *script_of; /* BMP bytes */
} Scripts;

/* The number of `script` in `names` (a list), added if new; -1 on an error. */
static Py_ssize_t
number_of(PyObject *names, PyObject *script)
{
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(names); i++) {
        int same = PyObject_RichCompareBool(PyList_GET_ITEM(names, i), script, Py_EQ);
        if (same != 0)
            return same < 0 ? -1 : i;
    }
    if (PyList_GET_SIZE(names) == MAX_SCRIPTS) {
        PyErr_Format(PyExc_ValueError, "Scripts: at most %d scripts", MAX_SCRIPTS);
        return -1;
    }
    return PyList_Append(names, script) < 0 ? -1 : PyList_GET_SIZE(names) - 1;
}

static int
add_range(Scripts *self, PyObject *names, PyObject *range)
{
    long first, last;
    int letters_only;
    PyObject *script;
    if (!PyTuple_Check(range) || !PyArg_ParseTuple(range, "llUp", &first, &last, &script, &letters_only)) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "Scripts: a range is (first, last, script, letters only)");
        return -1;
    }
    if (first < 0 || last >= BMP || first > last) {
        PyErr_Format(PyExc_ValueError, "Scripts: the range %ld-%ld is not within U+0000-U+FFFF", first, last);
        return -1;
    }
    Py_ssize_t number = number_of(names, script);
    if (number < 0)
        return -1;
    for (long c = first; c <= last; c++) {
        if (self->script_of[c] == 0 && (!letters_only || Py_UNICODE_ISALPHA((Py_UCS4)c)))
            self->script_of[c] = (unsigned char)(number + 1); /* the first range that holds c */
    }
    return 0;
}

static PyObject *
scripts_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = {"ranges", NULL};
    PyObject *ranges, *range, *iterator, *names;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O", keywords, &ranges))
        return NULL;
    if ((iterator = PyObject_GetIter(ranges)) == NULL)
        return NULL;
    Scripts *self = (Scripts *)type->tp_alloc(type, 0);
    if (self == NULL || (names = PyList_New(0)) == NULL) {
        Py_XDECREF(self);
        Py_DECREF(iterator);
        return NULL;
    }
    if ((self->script_of = PyMem_Calloc(BMP, 1)) == NULL)
        PyErr_NoMemory();
    while (!PyErr_Occurred() && (range = PyIter_Next(iterator)) != NULL) {
        add_range(self, names, range);
        Py_DECREF(range);
    }
    Py_DECREF(iterator);
    if (!PyErr_Occurred())
        self->names = PyList_AsTuple(names);
    Py_DECREF(names);
    if (PyErr_Occurred()) {
        Py_DECREF(self);
        return NULL;
    }
    return (PyObject *)self;
}

static void
scripts_dealloc(Scripts *self)
{
    Py_XDECREF(self->names);
    PyMem_Free(self->script_of);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *
count(Scripts *self, PyObject *text)
{
    if (ready_str(text, "Scripts.count") < 0)
        return NULL;
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    Py_ssize_t size = PyUnicode_GET_LENGTH(text), counts[MAX_SCRIPTS + 1] = {0};
    unsigned char order[MAX_SCRIPTS]; /* script numbers plus one, in the order first seen */
    int seen = 0;
    for (Py_ssize_t i = 0; i < size; i++) {
        Py_UCS4 c = PyUnicode_READ(kind, data, i);
        unsigned char script = c < BMP ? self->script_of[c] : 0;
        if (script != 0 && counts[script]++ == 0)
            order[seen++] = script;
    }
    PyObject *found = PyDict_New();
    for (int k = 0; found != NULL && k < seen; k++) {
        PyObject *number = PyLong_FromSsize_t(counts[order[k]]);
        if (number == NULL || PyDict_SetItem(found, PyTuple_GET_ITEM(self->names, order[k] - 1), number) < 0)
            Py_CLEAR(found);
        Py_XDECREF(number);
    }
    return found;
}

static PyMethodDef scripts_methods[] = {
    {"count", (PyCFunction)count, METH_O,
     "count(text: str) -> dict[str, int]: the characters of each script in the text, in the order "
     "of each script's first character."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject ScriptsType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "webui.leaderboard.votes._language.Scripts",
    .tp_basicsize = sizeof(Scripts),
    .tp_dealloc = (destructor)scripts_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Scripts(ranges): code-point ranges of scripts made into a table once, to count "
              "each script's characters in a text.",
    .tp_methods = scripts_methods,
    .tp_new = scripts_new,
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_language",
    .m_doc = "The language detector's ASCII path and count of scripts, compiled.",
    .m_size = -1,
};

PyMODINIT_FUNC
PyInit__language(void)
{
    for (int c = 'a'; c <= 'z'; c++)
        is_letter[c] = is_letter[c - 'a' + 'A'] = 1;
    if (PyType_Ready(&AsciiStopWordsType) < 0 || PyType_Ready(&ScriptsType) < 0)
        return NULL;
    PyObject *module = PyModule_Create(&module_def);
    if (module == NULL)
        return NULL;
    if (PyModule_AddObjectRef(module, "AsciiStopWords", (PyObject *)&AsciiStopWordsType) < 0
        || PyModule_AddObjectRef(module, "Scripts", (PyObject *)&ScriptsType) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
