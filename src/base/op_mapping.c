/*-------------------------------------------------------------------------
 *
 * op_mapping.c
 *	  Parsing and checking op_mapping objects, both directions.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "nodes/pg_list.h"
#include "utils/jsonb.h"

#include "base/op_mapping.h"

/* 'a, b ,c' -> trimmed items */
static List *
split_list(const char *s, int len)
{
	char	   *copy = pnstrdup(s, len);
	char	   *p = copy;
	List	   *items = NIL;

	for (;;)
	{
		char	   *end = strchr(p, ',');
		int			n;

		if (end)
			*end = '\0';
		while (*p == ' ' || *p == '\t')
			p++;
		n = strlen(p);
		while (n > 0 && (p[n - 1] == ' ' || p[n - 1] == '\t'))
			p[--n] = '\0';
		items = lappend(items, p);
		if (end == NULL)
			break;
		p = end + 1;
	}
	return items;
}

static RowKind
parse_kind_name(const char *name, const char *argname)
{
	int			k;

	for (k = 0; k < ROWKIND_COUNT; k++)
		if (strcmp(name, rowkind_long_name((RowKind) k)) == 0)
			return (RowKind) k;
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("unknown change operation \"%s\" in %s", name, argname),
			 errhint("Operations are INSERT, UPDATE_BEFORE, UPDATE_AFTER and DELETE.")));
	return ROWKIND_INSERT;		/* keep compiler quiet */
}

static void
mark_kind(bool *mapped, RowKind kind, const char *argname)
{
	if (mapped[kind])
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("duplicate change operation \"%s\" in %s",
						rowkind_long_name(kind), argname),
				 errdetail("Each operation may be mapped once.")));
	mapped[kind] = true;
}

static void
check_object(Jsonb *j, const char *argname, const char *example)
{
	if (!JB_ROOT_IS_OBJECT(j))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must be a JSON object", argname),
				 errhint("For example '%s'.", example)));
}

/*
 * Calls fn for every key and string value of the object; values of other
 * types are errors.
 */
static void
for_each_pair(Jsonb *j, const char *argname,
			  void (*fn) (void *arg, const char *key, int keylen,
						  const char *val, int vallen),
			  void *arg)
{
	JsonbIterator *it = JsonbIteratorInit(&j->root);
	JsonbValue	v;
	JsonbIteratorToken tok;
	char	   *key = NULL;
	int			keylen = 0;

	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		if (tok == WJB_KEY)
		{
			key = v.val.string.val;
			keylen = v.val.string.len;
		}
		else if (tok == WJB_VALUE)
		{
			if (v.type != jbvString)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("values in %s must be strings", argname)));
			fn(arg, key, keylen, v.val.string.val, v.val.string.len);
		}
	}
}

/* ---- kinds -> codes (TO_CHANGELOG, the output plugin) ---- */

void
op_mapping_identity(OpMapping *m)
{
	int			k;

	for (k = 0; k < ROWKIND_COUNT; k++)
	{
		m->mapped[k] = true;
		m->code[k] = pstrdup(rowkind_long_name((RowKind) k));
	}
	m->read_code = NULL;
	m->truncate_code = pstrdup("TRUNCATE");
}

typedef struct
{
	OpMapping  *m;
	const char *argname;
} OpPairArg;

static void
op_pair(void *arg, const char *key, int keylen, const char *val, int vallen)
{
	OpPairArg  *a = (OpPairArg *) arg;
	char	   *code = pnstrdup(val, vallen);
	ListCell   *lc;

	foreach(lc, split_list(key, keylen))
	{
		RowKind		kind;

		if (strcmp(lfirst(lc), "READ") == 0 || strcmp(lfirst(lc), "TRUNCATE") == 0)
		{
			char	  **slot = strcmp(lfirst(lc), "READ") == 0 ?
				&a->m->read_code : &a->m->truncate_code;

			if (*slot != NULL)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("duplicate change operation \"%s\" in %s",
								(char *) lfirst(lc), a->argname),
						 errdetail("Each operation may be mapped once.")));
			*slot = code;
			continue;
		}
		kind = parse_kind_name(lfirst(lc), a->argname);
		mark_kind(a->m->mapped, kind, a->argname);
		a->m->code[kind] = code;
	}
}

void
op_mapping_from_jsonb(Jsonb *j, OpMapping *m, const char *argname)
{
	OpPairArg	a = {m, argname};

	memset(m, 0, sizeof(OpMapping));
	check_object(j, argname, "{\"INSERT, UPDATE_AFTER\": \"u\", \"DELETE\": \"d\"}");
	for_each_pair(j, argname, op_pair, &a);
}

/* ---- codes -> kinds (FROM_CHANGELOG) ---- */

static void
add_code(CodeMapping *m, const char *code, RowKind kind, bool pair,
		 const char *argname)
{
	int			i;
	int			len = strlen(code);

	for (i = 0; i < m->ncodes; i++)
		if (m->lens[i] == len && memcmp(m->codes[i], code, len) == 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("duplicate code \"%s\" in %s", code, argname),
					 errdetail("Each code may mean one operation.")));
	if (m->ncodes % 8 == 0)
	{
		int			n = m->ncodes + 8;

		m->codes = m->ncodes ? repalloc(m->codes, sizeof(char *) * n) : palloc(sizeof(char *) * n);
		m->lens = m->ncodes ? repalloc(m->lens, sizeof(int) * n) : palloc(sizeof(int) * n);
		m->kind = m->ncodes ? repalloc(m->kind, sizeof(RowKind) * n) : palloc(sizeof(RowKind) * n);
		m->update_pair = m->ncodes ? repalloc(m->update_pair, sizeof(bool) * n) : palloc(sizeof(bool) * n);
	}
	m->codes[m->ncodes] = pstrdup(code);
	m->lens[m->ncodes] = len;
	m->kind[m->ncodes] = kind;
	m->update_pair[m->ncodes] = pair;
	m->ncodes++;
}

void
code_mapping_identity(CodeMapping *m)
{
	int			k;

	memset(m, 0, sizeof(CodeMapping));
	for (k = 0; k < ROWKIND_COUNT; k++)
	{
		add_code(m, rowkind_long_name((RowKind) k), (RowKind) k, false, "op_mapping");
		m->mapped[k] = true;
	}
}

typedef struct
{
	CodeMapping *m;
	const char *argname;
} CodePairArg;

static void
code_pair(void *arg, const char *key, int keylen, const char *val, int vallen)
{
	CodePairArg *a = (CodePairArg *) arg;
	List	   *kinds = split_list(val, vallen);
	RowKind		kind;
	bool		pair = false;
	ListCell   *lc;

	if (list_length(kinds) == 1)
	{
		kind = parse_kind_name(linitial(kinds), a->argname);
		mark_kind(a->m->mapped, kind, a->argname);
	}
	else
	{
		/* several kinds from one row: only an update's two halves, in order */
		if (list_length(kinds) != 2 ||
			parse_kind_name(linitial(kinds), a->argname) != ROWKIND_UPDATE_BEFORE ||
			parse_kind_name(lsecond(kinds), a->argname) != ROWKIND_UPDATE_AFTER)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("code \"%s\" in %s means several operations",
							pnstrdup(key, keylen), a->argname),
					 errdetail("One row can mean two operations only as 'UPDATE_BEFORE, UPDATE_AFTER': an update with its before and after images.")));
		mark_kind(a->m->mapped, ROWKIND_UPDATE_BEFORE, a->argname);
		mark_kind(a->m->mapped, ROWKIND_UPDATE_AFTER, a->argname);
		kind = ROWKIND_UPDATE_BEFORE;
		pair = true;
	}
	foreach(lc, split_list(key, keylen))
		add_code(a->m, lfirst(lc), kind, pair, a->argname);
}

void
code_mapping_from_jsonb(Jsonb *j, CodeMapping *m, const char *argname)
{
	CodePairArg a = {m, argname};

	memset(m, 0, sizeof(CodeMapping));
	check_object(j, argname,
				 "{\"c, r\": \"INSERT\", \"u\": \"UPDATE_BEFORE, UPDATE_AFTER\", \"d\": \"DELETE\"}");
	for_each_pair(j, argname, code_pair, &a);
	if (m->ncodes == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s maps no code", argname)));
}

int
code_mapping_lookup(const CodeMapping *m, const char *code, int len)
{
	int			i;

	for (i = 0; i < m->ncodes; i++)
		if (m->lens[i] == len && memcmp(m->codes[i], code, len) == 0)
			return i;
	return -1;
}
