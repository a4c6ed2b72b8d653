/* A battle vote's index row, compiled: webui.leaderboard.votes.rows.unchecked_vote_row, names_in and
 * webui.leaderboard.votes.ingest.sql_values in one pass over the record, for the shape votes are logged
 * in. A cold index reads every vote once, and walking a record's dictionaries in Python was the
 * largest part of that (docs/performance.md). And the names a log's bytes hold, found without
 * parsing them (webui.leaderboard.votes.ingest.logged_names).
 *
 * configure(winners, anonymous, text_style, detect_language, has_code, is_long, name_max,
 *           features_version, count_keys): once, with the tables, the text functions the Python
 * version uses (the counts and the language stay theirs), the longest model name a vote may give
 * (a longer one: Python says the vote is invalid), and what the features a vote record keeps from
 * when it was written look like (features.FEATURES_VERSION, the style count columns' names). Where
 * a record holds such features (features.stored_features, the same test) they are the row's, and
 * no text is counted.
 *
 * vote_values(record) -> (values, replies, names) | None:
 *   values: the row as sql_values gives it (a list in ROW_COLUMNS order, flags as 0/1);
 *   replies: the replies the identity check reads, or None where it does not apply;
 *   names: names_in(record).
 * None where the record is not a battle vote of the usual shape: any field of another type than a
 * log of ours or FastChat's holds (an int offset below 0, an int speed, a list of roles that is
 * not text, a public name in a heading, text that is a str subclass, ...). The caller then takes
 * the Python path, which also decides what such a record means (not a vote, an invalid one).
 * So this never answers differently from Python: it answers less often.
 * tests/unit/leaderboard/votes/test_leaderboard_fast_paths.py compares both on simulated votes and odd variants.
 *
 * Built where a C compiler is (setup.py, optional).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <string.h>

/* The columns, in battles.ROW_COLUMNS order (tests check the order against it). */
enum {
    TSTAMP, MODEL_A, MODEL_B, WINNER, ANONY, MODE, BATTLE_ID, QUESTION_ID, TURN, JUDGE, LANGUAGE,
    VOTER, SESSION, BASE_REASON, REDACTED, LEAK, ERROR, STOPPED, CODING, LONG_PROMPT,
    LENGTH_A, HEADERS_A, BOLD_A, LISTS_A, LENGTH_B, HEADERS_B, BOLD_B, LISTS_B,
    TTFT_S_A, TOKENS_PER_S_A, TTFT_S_B, TOKENS_PER_S_B, FINGERPRINT_A, FINGERPRINT_B,
    COLUMNS
};
static const int TEXT_COLUMNS[] = {MODEL_A, MODEL_B, MODE, BATTLE_ID, QUESTION_ID, LANGUAGE,
                                   VOTER, SESSION, FINGERPRINT_A, FINGERPRINT_B};

static PyObject *winners, *anonymous, *text_style, *detect_language, *has_code, *is_long, *count_keys;
static Py_ssize_t name_max = PY_SSIZE_T_MAX;
static long long features_version = -1;

/* Interned keys and constant texts. */
static PyObject *k_type, *k_states, *k_models, *k_roles, *k_messages, *k_offset, *k_model_name,
    *k_ip, *k_finish_reasons, *k_redacted, *k_hygiene, *k_identity_leak, *k_tstamp, *k_mode,
    *k_battle_id, *k_conv_id, *k_user, *k_extra, *k_session, *k_ttft_s, *k_tokens_per_s,
    *k_fingerprint, *k_features, *k_version, *k_language, *k_coding, *k_long_prompt, *s_user, *s_error, *s_cancelled, *s_battle, *s_side_by_side, *s_newline,
    *s_arena_user, *s_user_prefix, *s_ip_prefix, *s_invalid, *s_same_model, *s_empty, *s_h3, *f_zero;

/* A signal that the record is not of the usual shape (no Python error set). */
#define UNUSUAL 1

/* record[key] or NULL (borrowed); -1 with an error set. */
static int
get(PyObject *dict, PyObject *key, PyObject **out)
{
    *out = PyDict_GetItemWithError(dict, key);
    return *out == NULL && PyErr_Occurred() ? -1 : 0;
}

static int
is_anonymous(PyObject *name)
{
    /* an exact str here: compared as `name in ANONYMOUS_NAMES` compares it */
    Py_ssize_t n = PyTuple_GET_SIZE(anonymous);
    for (Py_ssize_t i = 0; i < n; i++)
        if (PyUnicode_Compare(name, PyTuple_GET_ITEM(anonymous, i)) == 0)
            return 1;
    return 0;
}

/* battles._texts: the user's and the assistant's texts after the state's offset, into two new
 * lists. 0, UNUSUAL (a shape Python may read otherwise or fail on), or -1 with an error set. */
static int
texts(PyObject *state, PyObject **users, PyObject **assistants)
{
    PyObject *roles, *messages, *offset_value, *role;
    if (get(state, k_roles, &roles) < 0 || get(state, k_messages, &messages) < 0
        || get(state, k_offset, &offset_value) < 0)
        return -1;
    if (roles == NULL || roles == Py_None)
        role = s_user;
    else if (PyList_CheckExact(roles) && PyList_GET_SIZE(roles) > 0
             && PyUnicode_CheckExact(PyList_GET_ITEM(roles, 0)))
        role = PyList_GET_ITEM(roles, 0);
    else
        return UNUSUAL; /* an empty list means the default, a string its first character: Python */
    Py_ssize_t offset = 0;
    if (offset_value != NULL) {
        if (!PyLong_CheckExact(offset_value))
            return UNUSUAL;
        offset = PyLong_AsSsize_t(offset_value);
        if (offset < 0) {
            PyErr_Clear();
            return UNUSUAL; /* counted from the end, or too large: Python */
        }
    }
    if (messages != NULL && !PyList_CheckExact(messages))
        return UNUSUAL;
    *users = PyList_New(0);
    *assistants = PyList_New(0);
    if (*users == NULL || *assistants == NULL)
        return -1;
    Py_ssize_t count = messages == NULL ? 0 : PyList_GET_SIZE(messages);
    for (Py_ssize_t i = offset; i < count; i++) {
        PyObject *message = PyList_GET_ITEM(messages, i);
        Py_ssize_t size;
        PyObject *speaker, *text;
        if (PyList_CheckExact(message)) {
            size = PyList_GET_SIZE(message);
            if (size != 2)
                continue;
            speaker = PyList_GET_ITEM(message, 0);
            text = PyList_GET_ITEM(message, 1);
        } else if (PyTuple_CheckExact(message)) {
            size = PyTuple_GET_SIZE(message);
            if (size != 2)
                continue;
            speaker = PyTuple_GET_ITEM(message, 0);
            text = PyTuple_GET_ITEM(message, 1);
        } else if (PyList_Check(message) || PyTuple_Check(message)) {
            return UNUSUAL; /* a subclass, whose len() may say otherwise */
        } else {
            continue;
        }
        if (PyUnicode_Check(text) && !PyUnicode_CheckExact(text))
            return UNUSUAL;
        Py_INCREF(speaker);
        int users_turn = PyObject_RichCompareBool(speaker, role, Py_EQ);
        Py_DECREF(speaker);
        if (users_turn < 0)
            return -1;
        if (PyList_Append(users_turn ? *users : *assistants, PyUnicode_CheckExact(text) ? text : s_empty) < 0)
            return -1;
    }
    return 0;
}

/* battles._finish_reasons(state): "error" in them, "cancelled" in them. */
static int
finish_reasons(PyObject *state, int *error, int *cancelled)
{
    PyObject *reasons;
    if (get(state, k_finish_reasons, &reasons) < 0)
        return -1;
    if (reasons == NULL)
        return 0;
    if (!PyList_CheckExact(reasons))
        return UNUSUAL; /* iterated: a string's characters, a dict's keys, or an error */
    int found;
    if (!*error) {
        if ((found = PySequence_Contains(reasons, s_error)) < 0)
            return -1;
        *error = found;
    }
    if (!*cancelled) {
        if ((found = PySequence_Contains(reasons, s_cancelled)) < 0)
            return -1;
        *cancelled = found;
    }
    return 0;
}

/* battles._judged_speed(state[key]) as a new reference (None included). */
static int
judged_speed(PyObject *state, PyObject *key, PyObject **out)
{
    PyObject *values;
    if (get(state, key, &values) < 0)
        return -1;
    PyObject *last = NULL;
    if (values != NULL && PyList_Check(values)) {
        if (!PyList_CheckExact(values))
            return UNUSUAL;
        Py_ssize_t n = PyList_GET_SIZE(values);
        last = n ? PyList_GET_ITEM(values, n - 1) : NULL;
    }
    if (last != NULL && PyFloat_CheckExact(last))
        *out = Py_NewRef(isfinite(PyFloat_AS_DOUBLE(last)) ? last : Py_None);
    else if (last != NULL && !PyBool_Check(last) && (PyLong_Check(last) || PyFloat_Check(last)))
        return UNUSUAL; /* an int (too large for a float: an invalid vote), a float subclass */
    else
        *out = Py_NewRef(Py_None);
    return 0;
}

/* battles._fingerprint(state), a new reference. */
static int
fingerprint(PyObject *state, PyObject **out)
{
    PyObject *value;
    if (get(state, k_fingerprint, &value) < 0)
        return -1;
    *out = Py_NewRef(value != NULL && PyUnicode_Check(value) && PyUnicode_GET_LENGTH(value) ? value : Py_None);
    return 0;
}

/* A text column's value: an exact str or None, else UNUSUAL (sql_values writes it as JSON). */
static int
text_or_none(PyObject *value)
{
    return value == Py_None || PyUnicode_CheckExact(value) ? 0 : UNUSUAL;
}

/* `"\n".join(texts)` styled: the four counts into values[first..first+3]. */
static int
styled(PyObject *texts_list, PyObject *values, Py_ssize_t first)
{
    PyObject *joined = PyUnicode_Join(s_newline, texts_list);
    if (joined == NULL)
        return -1;
    PyObject *counts = PyObject_CallOneArg(text_style, joined);
    Py_DECREF(joined);
    if (counts == NULL)
        return -1;
    if (!PyTuple_Check(counts) || PyTuple_GET_SIZE(counts) != 4) {
        Py_DECREF(counts);
        PyErr_SetString(PyExc_TypeError, "text_style must return four counts");
        return -1;
    }
    for (Py_ssize_t i = 0; i < 4; i++)
        PyList_SET_ITEM(values, first + i, Py_NewRef(PyTuple_GET_ITEM(counts, i)));
    Py_DECREF(counts);
    return 0;
}

/* A flag (the truth of what `function(argument)` returns) as 0 or 1; -1 with an error set. */
static int
flag_of(PyObject *function, PyObject *argument)
{
    PyObject *found = PyObject_CallOneArg(function, argument);
    if (found == NULL)
        return -1;
    int truth = PyObject_IsTrue(found);
    Py_DECREF(found);
    return truth;
}

/* An int in 0..LLONG_MAX (what SQLite holds) as features.stored_features takes it: 1 with its value,
 * 0 where it is not one, -1 with an error set. */
static int
stored_int(PyObject *item, long long *out)
{
    if (item == NULL || !PyLong_CheckExact(item))
        return 0;
    int overflow;
    *out = PyLong_AsLongLongAndOverflow(item, &overflow);
    if (*out == -1 && PyErr_Occurred())
        return -1;
    return !overflow && *out >= 0;
}

/* features.stored_features(record.get("features")): 1 with the stored counts put into
 * values[LENGTH_A..LISTS_B], the language (borrowed) and the flags; 0 where the record keeps
 * none of this version and shape (then the text is counted); -1 with an error set. */
static int
stored(PyObject *record, PyObject *values, PyObject **language, int *coding, int *long_prompt)
{
    PyObject *found, *item, *counts[8];
    long long number;
    int status;
    if (get(record, k_features, &found) < 0)
        return -1;
    if (found == NULL || !PyDict_CheckExact(found) || count_keys == NULL)
        return 0;
    if (get(found, k_version, &item) < 0 || (status = stored_int(item, &number)) < 0)
        return -1;
    if (!status || number != features_version)
        return 0;
    if (get(found, k_language, language) < 0)
        return -1;
    if (*language == NULL || !PyUnicode_CheckExact(*language))
        return 0;
    PyObject *flag_keys[2] = {k_coding, k_long_prompt};
    int *flags[2] = {coding, long_prompt};
    for (int i = 0; i < 2; i++) {
        if (get(found, flag_keys[i], &item) < 0)
            return -1;
        if (item == NULL || !PyBool_Check(item))
            return 0;
        *flags[i] = item == Py_True;
    }
    for (int i = 0; i < 8; i++) {
        if (get(found, PyTuple_GET_ITEM(count_keys, i), &counts[i]) < 0
            || (status = stored_int(counts[i], &number)) < 0)
            return -1;
        if (!status)
            return 0;
    }
    for (int i = 0; i < 8; i++)
        PyList_SET_ITEM(values, LENGTH_A + i, Py_NewRef(counts[i]));
    return 1;
}

/* battles._base_reason: a borrowed constant (or Py_None); NULL with an error set. */
static PyObject *
base_reason(PyObject *state_a, PyObject *state_b, PyObject *model_a, PyObject *model_b, int anony_a,
            int anony_b, PyObject *name_a, PyObject *name_b, Py_ssize_t prompts)
{
    if (anony_a != anony_b)
        return s_invalid;
    if (!(PyUnicode_Check(name_a) && PyUnicode_GET_LENGTH(name_a) && PyUnicode_Check(name_b)
          && PyUnicode_GET_LENGTH(name_b)))
        return s_invalid;
    if (!anony_a) { /* _hidden_names_match */
        PyObject *hidden_a, *hidden_b;
        if (get(state_a, k_model_name, &hidden_a) < 0 || get(state_b, k_model_name, &hidden_b) < 0)
            return NULL;
        hidden_a = hidden_a == NULL ? Py_None : hidden_a;
        hidden_b = hidden_b == NULL ? Py_None : hidden_b;
        if (!(hidden_a == Py_None && hidden_b == Py_None)) {
            /* `is or ==`, as PyObject_RichCompareBool compares */
            int same = PyObject_RichCompareBool(hidden_a, model_a, Py_EQ);
            if (same < 0)
                return NULL;
            if (same && (same = PyObject_RichCompareBool(hidden_b, model_b, Py_EQ)) < 0)
                return NULL;
            if (!same)
                return s_invalid;
        }
    }
    if (!prompts)
        return s_invalid;
    int same = PyObject_RichCompareBool(name_a, name_b, Py_EQ);
    if (same < 0)
        return NULL;
    return same ? s_same_model : Py_None;
}

/* The row's values into `values` (a list of COLUMNS NULLs) and the replies; 0, UNUSUAL or -1. */
static int
fill(PyObject *record, PyObject *values, PyObject **replies_out, PyObject **names_out)
{
    PyObject *kind, *states, *models, *winner;
    if (get(record, k_type, &kind) < 0)
        return -1;
    if (kind == NULL || !PyUnicode_CheckExact(kind))
        return UNUSUAL;
    if ((winner = PyDict_GetItemWithError(winners, kind)) == NULL)
        return PyErr_Occurred() ? -1 : UNUSUAL; /* not a battle vote: Python says so */
    if (get(record, k_states, &states) < 0 || get(record, k_models, &models) < 0)
        return -1;
    if (states == NULL || models == NULL || !PyList_CheckExact(states) || !PyList_CheckExact(models)
        || PyList_GET_SIZE(states) != 2 || PyList_GET_SIZE(models) != 2)
        return UNUSUAL;
    PyObject *state_a = PyList_GET_ITEM(states, 0), *state_b = PyList_GET_ITEM(states, 1);
    PyObject *model_a = PyList_GET_ITEM(models, 0), *model_b = PyList_GET_ITEM(models, 1);
    if (!PyDict_CheckExact(state_a) || !PyDict_CheckExact(state_b) || !PyUnicode_CheckExact(model_a)
        || !PyUnicode_CheckExact(model_b))
        return UNUSUAL;
    if (PyUnicode_Tailmatch(model_a, s_h3, 0, PY_SSIZE_T_MAX, -1)
        || PyUnicode_Tailmatch(model_b, s_h3, 0, PY_SSIZE_T_MAX, -1))
        return UNUSUAL; /* a public name in a heading (battles.public_name) */

    PyObject *prompts = NULL, *replies_a = NULL, *users_b = NULL, *replies_b = NULL, *prompt_text = NULL;
    int status = texts(state_a, &prompts, &replies_a);
    if (status == 0)
        status = texts(state_b, &users_b, &replies_b);
    if (status != 0)
        goto done;

    int anony_a = is_anonymous(model_a), anony_b = is_anonymous(model_b), anony = anony_a && anony_b;
    PyObject *name_a = model_a, *name_b = model_b;
    if (anony) {
        if ((status = get(state_a, k_model_name, &name_a)) < 0 || (status = get(state_b, k_model_name, &name_b)) < 0)
            goto done;
        name_a = name_a == NULL ? Py_None : name_a;
        name_b = name_b == NULL ? Py_None : name_b;
    }

    PyObject *ip, *user, *extra, *session = s_empty, *tstamp, *mode, *battle_id, *question_id;
    if ((status = get(record, k_ip, &ip)) < 0 || (status = get(record, k_user, &user)) < 0
        || (status = get(record, k_extra, &extra)) < 0 || (status = get(record, k_tstamp, &tstamp)) < 0
        || (status = get(record, k_mode, &mode)) < 0 || (status = get(record, k_battle_id, &battle_id)) < 0
        || (status = get(state_a, k_conv_id, &question_id)) < 0)
        goto done;
    status = UNUSUAL;
    if (ip == NULL || ip == Py_None)
        ip = s_empty;
    else if (!PyUnicode_CheckExact(ip))
        goto done; /* `ip or ""` of another type: Python */
    if (user == NULL || user == Py_None)
        user = s_empty;
    else if (!PyUnicode_CheckExact(user))
        goto done;
    if (extra != NULL && PyDict_Check(extra)) {
        if (!PyDict_CheckExact(extra))
            goto done;
        PyObject *found;
        if ((status = get(extra, k_session, &found)) < 0)
            goto done;
        status = UNUSUAL;
        session = found != NULL && PyUnicode_Check(found) ? found : s_empty;
    }
    if (tstamp == NULL)
        tstamp = f_zero;
    else if (!PyFloat_CheckExact(tstamp))
        goto done; /* float() of an int, a string, ...: Python */
    if (mode == NULL)
        mode = anony ? s_battle : s_side_by_side;
    battle_id = battle_id == NULL ? Py_None : battle_id;
    question_id = question_id == NULL ? Py_None : question_id;

    int error = 0, cancelled = 0;
    if ((status = finish_reasons(state_a, &error, &cancelled)) != 0
        || (status = finish_reasons(state_b, &error, &cancelled)) != 0)
        goto done;

    int redacted = 0, leak = 0;
    PyObject *flag;
    for (int side = 0; side < 2 && !redacted; side++) {
        if ((status = get(side ? state_b : state_a, k_redacted, &flag)) < 0)
            goto done;
        if (flag != NULL && (redacted = PyObject_IsTrue(flag)) < 0) {
            status = -1;
            goto done;
        }
    }
    if (redacted) {
        PyObject *hygiene;
        if ((status = get(record, k_hygiene, &hygiene)) < 0)
            goto done;
        if (hygiene != NULL && PyDict_Check(hygiene)) {
            status = UNUSUAL;
            if (!PyDict_CheckExact(hygiene))
                goto done;
            if ((status = get(hygiene, k_identity_leak, &flag)) < 0)
                goto done;
            if (flag != NULL && (leak = PyObject_IsTrue(flag)) < 0) {
                status = -1;
                goto done;
            }
        }
    }

    /* From here on every value is known to be of the usual shape: errors only. */
    status = -1;
    Py_ssize_t turn = PyList_GET_SIZE(prompts);
    PyObject *reason = base_reason(state_a, state_b, model_a, model_b, anony_a, anony_b, name_a, name_b, turn);
    if (reason == NULL)
        goto done;
    PyObject *language = NULL;
    int coding = 0, long_prompt = 0, kept = stored(record, values, &language, &coding, &long_prompt);
    if (kept < 0)
        goto done;
    if (kept) {
        Py_INCREF(language);
    } else { /* counted now, by the functions the Python path calls */
        if ((prompt_text = PyUnicode_Join(s_newline, prompts)) == NULL)
            goto done;
        if (styled(replies_a, values, LENGTH_A) < 0 || styled(replies_b, values, LENGTH_B) < 0)
            goto done;
        coding = flag_of(has_code, prompt_text);
        long_prompt = coding < 0 ? -1 : flag_of(is_long, prompt_text);
        if (long_prompt < 0)
            goto done;
        language = PyObject_CallOneArg(detect_language, turn ? PyList_GET_ITEM(prompts, 0) : s_empty);
        if (language == NULL)
            goto done;
    }
    PyList_SET_ITEM(values, LANGUAGE, language);
    PyObject *judge = PyUnicode_Concat(s_arena_user, ip);
    if (judge == NULL)
        goto done;
    PyList_SET_ITEM(values, JUDGE, judge);
    PyObject *voter = PyUnicode_GET_LENGTH(user) ? PyUnicode_Concat(s_user_prefix, user)
                      : PyUnicode_GET_LENGTH(ip) ? PyUnicode_Concat(s_ip_prefix, ip)
                                                 : Py_NewRef(s_empty);
    if (voter == NULL)
        goto done;
    PyList_SET_ITEM(values, VOTER, voter);
    PyObject *speed;
    PyObject *speed_keys[2] = {k_ttft_s, k_tokens_per_s};
    for (int side = 0; side < 2; side++)
        for (int k = 0; k < 2; k++) {
            if ((status = judged_speed(side ? state_b : state_a, speed_keys[k], &speed)) != 0)
                goto done;
            PyList_SET_ITEM(values, TTFT_S_A + 2 * side + k, speed);
        }
    status = -1;
    PyObject *fingerprint_value;
    if (fingerprint(state_a, &fingerprint_value) < 0)
        goto done;
    PyList_SET_ITEM(values, FINGERPRINT_A, fingerprint_value);
    if (fingerprint(state_b, &fingerprint_value) < 0)
        goto done;
    PyList_SET_ITEM(values, FINGERPRINT_B, fingerprint_value);

    PyList_SET_ITEM(values, TSTAMP, Py_NewRef(tstamp));
    PyList_SET_ITEM(values, MODEL_A, Py_NewRef(name_a));
    PyList_SET_ITEM(values, MODEL_B, Py_NewRef(name_b));
    PyList_SET_ITEM(values, WINNER, Py_NewRef(winner));
    PyList_SET_ITEM(values, MODE, Py_NewRef(mode));
    PyList_SET_ITEM(values, BATTLE_ID, Py_NewRef(battle_id));
    PyList_SET_ITEM(values, QUESTION_ID, Py_NewRef(question_id));
    PyList_SET_ITEM(values, SESSION, Py_NewRef(session));
    PyList_SET_ITEM(values, BASE_REASON, Py_NewRef(reason));
    int flags[][2] = {{ANONY, anony}, {REDACTED, redacted}, {LEAK, redacted && leak}, {ERROR, error},
                      {STOPPED, cancelled}, {CODING, coding}, {LONG_PROMPT, long_prompt}};
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++)
        PyList_SET_ITEM(values, flags[i][0], PyLong_FromLong(flags[i][1])); /* small ints: cached */
    PyObject *turns = PyLong_FromSsize_t(turn);
    if (turns == NULL)
        goto done;
    PyList_SET_ITEM(values, TURN, turns);

    status = UNUSUAL;
    for (size_t i = 0; i < sizeof TEXT_COLUMNS / sizeof TEXT_COLUMNS[0]; i++)
        if (text_or_none(PyList_GET_ITEM(values, TEXT_COLUMNS[i])) != 0)
            goto done; /* written as JSON (ingest.sql_values): Python */

    status = -1;
    /* names_in: the states' names and the public ones, less the placeholders */
    PyObject *names = PySet_New(NULL);
    if (names == NULL)
        goto done;
    PyObject *candidates[4] = {NULL, NULL, model_a, model_b};
    if (get(state_a, k_model_name, &candidates[0]) < 0 || get(state_b, k_model_name, &candidates[1]) < 0) {
        Py_DECREF(names);
        goto done;
    }
    for (int i = 0; i < 4; i++) {
        PyObject *name = candidates[i];
        if (name == NULL || !PyUnicode_Check(name))
            continue;
        if (!PyUnicode_CheckExact(name) || PyUnicode_GET_LENGTH(name) > name_max) {
            Py_DECREF(names);
            status = UNUSUAL; /* (a name over the cap: rows.unchecked_vote_row makes the vote invalid) */
            goto done;
        }
        if (!is_anonymous(name) && PySet_Add(names, name) < 0) {
            Py_DECREF(names);
            goto done;
        }
    }
    *names_out = names;
    if (!redacted && reason == Py_None) {
        PyObject *both = PySequence_Concat(replies_a, replies_b);
        if (both == NULL)
            goto done;
        *replies_out = PyList_AsTuple(both);
        Py_DECREF(both);
        if (*replies_out == NULL)
            goto done;
    } else {
        *replies_out = Py_NewRef(Py_None);
    }
    status = 0;
done:
    Py_XDECREF(prompts);
    Py_XDECREF(replies_a);
    Py_XDECREF(users_b);
    Py_XDECREF(replies_b);
    Py_XDECREF(prompt_text);
    if (status == -1 && !PyErr_Occurred())
        PyErr_SetString(PyExc_SystemError, "vote_values failed without an error");
    if (status != 0 && status != -1 && PyErr_Occurred())
        PyErr_Clear(); /* an unusual shape that an API call noticed first: Python decides */
    return status;
}

static PyObject *
vote_values(PyObject *module, PyObject *record)
{
    if (winners == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "vote_values: configure() first");
        return NULL;
    }
    if (!PyDict_CheckExact(record))
        Py_RETURN_NONE;
    PyObject *values = PyList_New(COLUMNS), *replies = NULL, *names = NULL;
    if (values == NULL)
        return NULL;
    int status = fill(record, values, &replies, &names);
    if (status != 0) {
        Py_DECREF(values);
        Py_XDECREF(replies);
        Py_XDECREF(names);
        if (status < 0)
            return NULL;
        Py_RETURN_NONE;
    }
    PyObject *out = PyTuple_Pack(3, values, replies, names);
    Py_DECREF(values);
    Py_DECREF(replies);
    Py_DECREF(names);
    return out;
}

static PyObject *
configure(PyObject *module, PyObject *args)
{
    PyObject *new_winners, *new_anonymous, *style, *language, *code, *long_text, *new_count_keys;
    Py_ssize_t new_name_max;
    long long new_features_version;
    if (!PyArg_ParseTuple(args, "O!O!OOOOnLO!:configure", &PyDict_Type, &new_winners, &PyTuple_Type, &new_anonymous,
                          &style, &language, &code, &long_text, &new_name_max, &new_features_version,
                          &PyTuple_Type, &new_count_keys))
        return NULL;
    if (PyTuple_GET_SIZE(new_count_keys) != 8) {
        PyErr_SetString(PyExc_TypeError, "configure: eight style count keys, side a's four then side b's");
        return NULL;
    }
    for (Py_ssize_t i = 0; i < 8; i++)
        if (!PyUnicode_CheckExact(PyTuple_GET_ITEM(new_count_keys, i))) {
            PyErr_SetString(PyExc_TypeError, "configure: the style count keys must be str");
            return NULL;
        }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(new_anonymous); i++)
        if (!PyUnicode_CheckExact(PyTuple_GET_ITEM(new_anonymous, i))) {
            PyErr_SetString(PyExc_TypeError, "configure: the anonymous names must be str");
            return NULL;
        }
    Py_XSETREF(winners, PyDict_Copy(new_winners));
    if (winners == NULL)
        return NULL;
    Py_XSETREF(anonymous, Py_NewRef(new_anonymous));
    Py_XSETREF(text_style, Py_NewRef(style));
    Py_XSETREF(detect_language, Py_NewRef(language));
    Py_XSETREF(has_code, Py_NewRef(code));
    Py_XSETREF(is_long, Py_NewRef(long_text));
    name_max = new_name_max;
    features_version = new_features_version;
    Py_XSETREF(count_keys, Py_NewRef(new_count_keys));
    Py_RETURN_NONE;
}

/* model_names_in(data: bytes) -> set[bytes]: the raw JSON text (escapes as written) of every
 * string that follows a "model_name" key in `data`; ingest._python_model_names_in is the same
 * as a regular expression. */
static PyObject *
model_names_in(PyObject *module, PyObject *arg)
{
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    static const char key[] = "\"model_name\"";
    const size_t key_size = sizeof key - 1;
    const char *at = view.buf, *end = at + view.len;
    PyObject *found = PySet_New(NULL);
    if (found == NULL)
        goto done;
    const char *hit;
    while ((size_t)(end - at) >= key_size && (hit = memmem(at, end - at, key, key_size)) != NULL) {
        at = hit + key_size;
        while (at < end && (*at == ' ' || *at == '\t' || *at == '\n' || *at == '\r'))
            at++;
        if (at < end && *at == ':')
            at++;
        else
            at = end; /* (not a key: look again from the next byte, as the expression does) */
        while (at < end && (*at == ' ' || *at == '\t' || *at == '\n' || *at == '\r'))
            at++;
        if (at == end || *at != '"') {
            at = hit + 1; /* the key's closing quote may open another key */
            continue;
        }
        const char *start = ++at;
        /* an escape takes two bytes, but never past the end: a pointer beyond one past the end is
         * undefined behaviour even unread (a backslash as the buffer's last byte) */
        while (at < end && *at != '"')
            at += *at == '\\' && end - at > 1 ? 2 : 1;
        if (at == end)
            break; /* no closing quote */
        PyObject *name = PyBytes_FromStringAndSize(start, at - start);
        if (name == NULL || PySet_Add(found, name) < 0) {
            Py_XDECREF(name);
            Py_CLEAR(found);
            goto done;
        }
        Py_DECREF(name);
        at++;
    }
done:
    PyBuffer_Release(&view);
    return found;
}

static PyMethodDef methods[] = {
    {"configure", configure, METH_VARARGS,
     "configure(winners, anonymous, text_style, detect_language, has_code, is_long, name_max, features_version, "
     "count_keys) -> None: the tables, text functions, longest model name and stored features' shape of "
     "webui.leaderboard.votes.rows."},
    {"vote_values", vote_values, METH_O,
     "vote_values(record) -> (values, replies, names) | None: a battle vote's index row as "
     "ingest.sql_values gives it, the replies to check and names_in(record); None where Python must read it."},
    {"model_names_in", model_names_in, METH_O,
     "model_names_in(data: bytes) -> set[bytes]: the raw JSON strings that follow a \"model_name\" key."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "_rows", "A battle vote's index row, compiled.", -1, methods,
};

static int
intern_all(void)
{
    struct {
        PyObject **slot;
        const char *text;
    } texts_to_intern[] = {
        {&k_type, "type"}, {&k_states, "states"}, {&k_models, "models"}, {&k_roles, "roles"},
        {&k_messages, "messages"}, {&k_offset, "offset"}, {&k_model_name, "model_name"}, {&k_ip, "ip"},
        {&k_finish_reasons, "finish_reasons"}, {&k_redacted, "redacted"}, {&k_hygiene, "hygiene"},
        {&k_identity_leak, "identity_leak"}, {&k_tstamp, "tstamp"}, {&k_mode, "mode"},
        {&k_battle_id, "battle_id"}, {&k_conv_id, "conv_id"}, {&k_user, "user"}, {&k_extra, "extra"},
        {&k_session, "session"}, {&k_ttft_s, "ttft_s"}, {&k_tokens_per_s, "tokens_per_s"},
        {&k_fingerprint, "fingerprint"}, {&k_features, "features"}, {&k_version, "version"},
        {&k_language, "language"}, {&k_coding, "coding"}, {&k_long_prompt, "long_prompt"}, {&s_user, "user"}, {&s_error, "error"}, {&s_cancelled, "cancelled"},
        {&s_battle, "battle"}, {&s_side_by_side, "side_by_side"}, {&s_newline, "\n"},
        {&s_arena_user, "arena_user_"}, {&s_user_prefix, "user:"}, {&s_ip_prefix, "ip:"},
        {&s_invalid, "invalid"}, {&s_same_model, "same_model"}, {&s_empty, ""}, {&s_h3, "<h3>"},
    };
    for (size_t i = 0; i < sizeof texts_to_intern / sizeof texts_to_intern[0]; i++)
        if ((*texts_to_intern[i].slot = PyUnicode_InternFromString(texts_to_intern[i].text)) == NULL)
            return -1;
    return (f_zero = PyFloat_FromDouble(0.0)) == NULL ? -1 : 0;
}

PyMODINIT_FUNC
PyInit__rows(void)
{
    if (intern_all() < 0)
        return NULL;
    return PyModule_Create(&module_def);
}
