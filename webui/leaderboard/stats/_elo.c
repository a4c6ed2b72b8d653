/* The online Elo of a board, compiled (webui.leaderboard.stats.elo.elo_updates).
 *
 * elo_updates(rating, a, b, score, k, scale, base) -> list[float]: `rating` (per model index)
 * carried on through the battles (a[i], b[i], score[i]) in that order, with the arithmetic of the
 * Python version step for step: the same numbers to the last bit. The Python loop is sequential
 * by nature and takes about half a second per million battles, the whole board's largest step
 * after the fits.
 *
 * a and b are C-contiguous int64 buffers of model indices (numpy arrays), score a float64 one.
 * An index outside the ratings raises IndexError (the Python version wraps a negative one: no
 * board has any), and an update that overflows raises OverflowError as `**` does.
 *
 * Built where a C compiler is (setup.py, optional); ratings.py falls back to its Python version
 * elsewhere, and tests/unit/leaderboard/votes/test_leaderboard_fast_paths.py checks that both agree.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

/* A C-contiguous buffer of `count` items of `itemsize` bytes and a format in `formats`. */
static int
get_vector(PyObject *object, Py_buffer *view, const char *formats, const char *what)
{
    if (PyObject_GetBuffer(object, view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0)
        return -1;
    const char *format = view->format ? view->format : "B";
    if (format[0] == '<' || format[0] == '=' || format[0] == '@')
        format++;
    if (view->ndim != 1 || view->itemsize != 8 || strlen(format) != 1 || !strchr(formats, format[0])) {
        PyErr_Format(PyExc_TypeError, "elo_updates: %s must be a vector of 8-byte %s", what,
                     formats[0] == 'd' ? "floats" : "integers");
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

static PyObject *
elo_updates(PyObject *module, PyObject *args)
{
    PyObject *initial, *a_object, *b_object, *score_object;
    double k, scale, base;
    if (!PyArg_ParseTuple(args, "OOOOddd:elo_updates", &initial, &a_object, &b_object, &score_object, &k, &scale,
                          &base))
        return NULL;
    if (scale == 0.0) {
        PyErr_SetString(PyExc_ZeroDivisionError, "elo_updates: scale is 0");
        return NULL;
    }
    PyObject *ratings = PySequence_List(initial);
    if (ratings == NULL)
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(ratings);
    double *rating = PyMem_Malloc((n ? n : 1) * sizeof(double));
    Py_buffer a_view = {0}, b_view = {0}, score_view = {0};
    PyObject *result = NULL;
    if (rating == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t m = 0; m < n; m++) {
        rating[m] = PyFloat_AsDouble(PyList_GET_ITEM(ratings, m));
        if (rating[m] == -1.0 && PyErr_Occurred())
            goto done;
    }
    if (get_vector(a_object, &a_view, "ql", "a") < 0 || get_vector(b_object, &b_view, "ql", "b") < 0 ||
        get_vector(score_object, &score_view, "d", "score") < 0)
        goto done;
    Py_ssize_t count = a_view.len / 8;
    if (b_view.len / 8 != count || score_view.len / 8 != count) {
        PyErr_SetString(PyExc_ValueError, "elo_updates: a, b and score differ in length");
        goto done;
    }
    const int64_t *a = a_view.buf, *b = b_view.buf;
    const double *score = score_view.buf;
    for (Py_ssize_t t = 0; t < count; t++) {
        int64_t i = a[t], j = b[t];
        if (i < 0 || i >= n || j < 0 || j >= n) {
            PyErr_Format(PyExc_IndexError, "elo_updates: battle %zd names model %lld of %zd", t,
                         (long long)(i < 0 || i >= n ? i : j), n);
            goto done;
        }
        double old_i = rating[i], old_j = rating[j];
        double exponent = (old_j - old_i) / scale;
        double power = pow(base, exponent);
        if (isinf(power) && isfinite(base) && isfinite(exponent)) {
            PyErr_SetString(PyExc_OverflowError, "elo_updates: a rating difference too large");
            goto done;
        }
        double change = k * (score[t] - 1.0 / (1.0 + power));
        rating[i] = old_i + change;
        rating[j] = old_j - change;
    }
    for (Py_ssize_t m = 0; m < n; m++) {
        PyObject *value = PyFloat_FromDouble(rating[m]);
        if (value == NULL)
            goto done;
        PyList_SetItem(ratings, m, value); /* steals the reference, drops the old item */
    }
    result = ratings;
    ratings = NULL;
done:
    if (a_view.obj)
        PyBuffer_Release(&a_view);
    if (b_view.obj)
        PyBuffer_Release(&b_view);
    if (score_view.obj)
        PyBuffer_Release(&score_view);
    PyMem_Free(rating);
    Py_XDECREF(ratings);
    return result;
}

static PyMethodDef methods[] = {
    {"elo_updates", elo_updates, METH_VARARGS,
     "elo_updates(rating, a, b, score, k, scale, base) -> list[float]: elo.elo_updates, compiled."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "_elo", "The online Elo of a board, compiled.", -1, methods,
};

PyMODINIT_FUNC
PyInit__elo(void)
{
    return PyModule_Create(&module_def);
}
