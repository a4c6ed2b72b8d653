/* The identity check's token scan in one pass over the bytes (webui.records.identity._tokens_of).
 *
 * tokens_in(text, firsts) -> set[str]: the members of `firsts` (a set of non-empty ASCII bytes)
 * that are whole tokens of `text`, a token being a maximal run of the bytes a-z or a maximal run
 * of 0-9 (any other byte, upper case included, only separates: the caller lowers the text first).
 * The pure-Python version splits the text twice and makes an object per token (about 200 for a
 * vote's replies); here a run is hashed only when its first two characters begin a member (or its
 * one character is one), and becomes an object only when that hash falls on a bit that a member's
 * hash set, which few do (about 50 members in 16,384 bits). The bits of the last set of members
 * are kept: the identity check passes the same (cached) set for every vote.
 *
 * json_tokens_in(line, firsts) -> set[str] | None: the same over a JSON text as it is written (any
 * case; escapes only separate runs), or None where the bytes cannot tell (identity.json_first_tokens).
 *
 * Built where a C compiler is (setup.py, optional); identity.py falls back to the Python
 * version elsewhere, and tests/unit/leaderboard/votes/test_leaderboard_fast_paths.py checks that both agree.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

enum { OTHER = 0, LETTER = 1, DIGIT = 2 };
#define HASH_BITS 16384 /* a run whose hash's bit is clear is no member */
/* A run's first two characters (or its one and none) as a number: a-z 1-26, 0-9 27-36, none 0. */
#define SLOTS 37
#define LEADS (SLOTS * SLOTS)

static unsigned char kind_of[256];
static unsigned char slot_of[256];

/* What a set of members gives a scan: their hashes' bits and their leads' bits. */
typedef struct {
    uint64_t hashes[HASH_BITS / 64];
    uint64_t leads[(LEADS + 63) / 64];
} Members;

static PyObject *last_members; /* the set the cache below was made of (a reference is held) */
static Members last_bits;

static int
lead_of(const unsigned char *start, Py_ssize_t length)
{
    return slot_of[start[0]] * SLOTS + (length > 1 ? slot_of[start[1]] : 0);
}

static uint32_t
hash_step(uint32_t hash, unsigned char byte)
{
    return (hash ^ byte) * 16777619u; /* FNV-1a */
}

static uint32_t
hash_of(const unsigned char *start, Py_ssize_t length)
{
    uint32_t hash = 2166136261u;
    for (Py_ssize_t i = 0; i < length; i++)
        hash = hash_step(hash, start[i]);
    return hash;
}

static void
set_bit(uint64_t *bits, uint32_t hash)
{
    hash %= HASH_BITS;
    bits[hash / 64] |= (uint64_t)1 << (hash % 64);
}

static int
bit_is_set(const uint64_t *bits, uint32_t hash)
{
    hash %= HASH_BITS;
    return (bits[hash / 64] >> (hash % 64)) & 1;
}

/* The members' hash bits and lead bits. */
static int
bits_of(PyObject *firsts, uint64_t *bits, uint64_t *leads)
{
    PyObject *iterator = PyObject_GetIter(firsts);
    PyObject *item;
    if (iterator == NULL)
        return -1;
    while ((item = PyIter_Next(iterator)) != NULL) {
        if (!PyBytes_Check(item)) {
            Py_DECREF(item);
            Py_DECREF(iterator);
            PyErr_SetString(PyExc_TypeError, "every first token must be bytes");
            return -1;
        }
        const unsigned char *member = (const unsigned char *)PyBytes_AS_STRING(item);
        Py_ssize_t length = PyBytes_GET_SIZE(item);
        set_bit(bits, hash_of(member, length));
        if (length > 0) {
            int lead = lead_of(member, length);
            leads[lead / 64] |= (uint64_t)1 << (lead % 64);
        }
        Py_DECREF(item);
    }
    Py_DECREF(iterator);
    return PyErr_Occurred() ? -1 : 0;
}

/* Adds the run (in any case) to `found`, lowered, if that is a member of `firsts`; -1 on an error. */
static int
add_lowered_if_member(PyObject *firsts, PyObject *found, const unsigned char *start, Py_ssize_t length)
{
    PyObject *run = PyBytes_FromStringAndSize(NULL, length);
    if (run == NULL)
        return -1;
    char *lowered = PyBytes_AS_STRING(run);
    for (Py_ssize_t k = 0; k < length; k++)
        lowered[k] = (char)(start[k] >= 'A' && start[k] <= 'Z' ? start[k] | 0x20 : start[k]);
    int member = PySet_Contains(firsts, run);
    if (member > 0) {
        PyObject *text = PyUnicode_DecodeASCII(lowered, length, NULL);
        member = text == NULL ? -1 : PySet_Add(found, text);
        Py_XDECREF(text);
    }
    Py_DECREF(run);
    return member < 0 ? -1 : 0;
}

/* The bits of `firsts` (a set of bytes), or -1 with an error set. */
static int
members_of(PyObject *firsts, const char *name, uint64_t *bits, uint64_t *leads)
{
    if (!PyAnySet_Check(firsts)) {
        PyErr_Format(PyExc_TypeError, "%s: the first tokens must be a set or frozenset", name);
        return -1;
    }
    return bits_of(firsts, bits, leads);
}

/* Parses a scan's (text, firsts) and sets the members' bits: the empty set the scan fills, or
 * NULL with an error set (and the buffer released). */
static PyObject *
begin_scan(PyObject *args, const char *name, Py_buffer *text, PyObject **firsts, uint64_t *bits, uint64_t *leads)
{
    if (!PyArg_ParseTuple(args, "y*O", text, firsts))
        return NULL;
    if (members_of(*firsts, name, bits, leads) == 0) {
        PyObject *found = PySet_New(NULL);
        if (found != NULL)
            return found;
    }
    PyBuffer_Release(text);
    return NULL;
}

static PyObject *
tokens_in(PyObject *module, PyObject *args)
{
    Py_buffer text;
    PyObject *firsts;
    if (!PyArg_ParseTuple(args, "y*O", &text, &firsts))
        return NULL;
    if (firsts != last_members || !PyFrozenSet_CheckExact(firsts)) { /* a set may change: not kept */
        static Members fresh;
        memset(&fresh, 0, sizeof fresh);
        if (members_of(firsts, "tokens_in", fresh.hashes, fresh.leads) < 0) {
            PyBuffer_Release(&text);
            return NULL;
        }
        last_bits = fresh;
        Py_XSETREF(last_members, Py_NewRef(firsts));
    }
    PyObject *found = PySet_New(NULL);
    if (found == NULL) {
        PyBuffer_Release(&text);
        return NULL;
    }
    const uint64_t *bits = last_bits.hashes, *leads = last_bits.leads;
    const unsigned char *bytes = text.buf;
    Py_ssize_t size = text.len, i = 0;
    while (i < size) {
        unsigned char kind = kind_of[bytes[i]];
        if (kind == OTHER) {
            i++;
            continue;
        }
        Py_ssize_t end = i + 1;
        while (end < size && kind_of[bytes[end]] == kind)
            end++;
        int lead = lead_of(bytes + i, end - i);
        if ((leads[lead / 64] >> (lead % 64)) & 1 && bit_is_set(bits, hash_of(bytes + i, end - i))
            && add_lowered_if_member(firsts, found, bytes + i, end - i) < 0) {
            Py_CLEAR(found);
            break;
        }
        i = end;
    }
    PyBuffer_Release(&text);
    return found;
}

static int
hex_value(unsigned char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c |= 0x20;
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* json_tokens_in(line, firsts): tokens_in over a JSON text as written (any case, escapes as
 * they are), or None where the bytes cannot tell: a byte beyond ASCII, or a \u escape of an ASCII
 * character or of one that lowers to ASCII letters (U+0130, U+212A). Every other escape only
 * separates runs, as the characters it stands for do in the text. */
static PyObject *
json_tokens_in(PyObject *module, PyObject *args)
{
    Py_buffer text;
    PyObject *firsts;
    uint64_t bits[HASH_BITS / 64] = {0}, leads[(LEADS + 63) / 64] = {0};
    PyObject *found = begin_scan(args, "json_tokens_in", &text, &firsts, bits, leads);
    if (found == NULL)
        return NULL;
    const unsigned char *bytes = text.buf;
    Py_ssize_t size = text.len, i = 0;
    while (i < size) {
        unsigned char byte = bytes[i];
        if (byte >= 0x80)
            goto cannot_tell;
        if (byte == '\\') {
            /* \U too (no JSON), as the Python version, which lowers first, reads it */
            if (i + 1 < size && (bytes[i + 1] | 0x20) == 'u') {
                int code = 0;
                for (int k = 2; k < 6; k++) {
                    int digit = i + k < size ? hex_value(bytes[i + k]) : -1;
                    if (digit < 0)
                        goto cannot_tell; /* not JSON: let the parser say so */
                    code = code * 16 + digit;
                }
                if (code < 0x80 || code == 0x130 || code == 0x212A)
                    goto cannot_tell;
                i += 6;
            } else {
                i += 2;
            }
            continue;
        }
        unsigned char kind = kind_of[byte | (byte >= 'A' && byte <= 'Z' ? 0x20 : 0)];
        if (kind == OTHER) {
            i++;
            continue;
        }
        uint32_t hash = 2166136261u;
        Py_ssize_t end = i;
        while (end < size) {
            unsigned char c = bytes[end];
            if (c >= 'A' && c <= 'Z')
                c |= 0x20;
            if (kind_of[c] != kind)
                break;
            hash = hash_step(hash, c);
            end++;
        }
        if (bit_is_set(bits, hash) && add_lowered_if_member(firsts, found, bytes + i, end - i) < 0) {
            Py_CLEAR(found);
            goto done;
        }
        i = end;
    }
    goto done;
cannot_tell:
    Py_SETREF(found, Py_NewRef(Py_None));
done:
    PyBuffer_Release(&text);
    return found;
}

static PyMethodDef methods[] = {
    {"tokens_in", tokens_in, METH_VARARGS,
     "tokens_in(text: bytes, firsts: frozenset[bytes]) -> set[str]: the members of firsts that are "
     "whole runs of a-z, or of 0-9, in text."},
    {"json_tokens_in", json_tokens_in, METH_VARARGS,
     "json_tokens_in(line: bytes, firsts: frozenset[bytes]) -> set[str] | None: tokens_in over JSON "
     "text as written (any case, escapes separate), or None where the bytes cannot tell."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "_tokens", "The identity check's token scan, compiled.", -1, methods,
};

PyMODINIT_FUNC
PyInit__tokens(void)
{
    for (int c = 'a'; c <= 'z'; c++)
        kind_of[c] = LETTER;
    for (int c = '0'; c <= '9'; c++)
        kind_of[c] = DIGIT;
    for (int c = 'a'; c <= 'z'; c++)
        slot_of[c] = (unsigned char)(c - 'a' + 1);
    for (int c = '0'; c <= '9'; c++)
        slot_of[c] = (unsigned char)(c - '0' + 27);
    return PyModule_Create(&module_def);
}
