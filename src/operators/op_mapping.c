/*-------------------------------------------------------------------------
 *
 * op_mapping.c
 *	  Parsing and checking op_mapping objects.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/jsonb.h"

#include "operators/op_mapping.h"

void
op_mapping_identity(OpMapping *m)
{
	int			k;

	for (k = 0; k < ROWKIND_COUNT; k++)
	{
		m->mapped[k] = true;
		m->code[k] = pstrdup(rowkind_long_name((RowKind) k));
	}
}

/* Kind names of a key such as 'INSERT, UPDATE_AFTER', trimmed. */
static void
map_kinds(OpMapping *m, const char *key, int keylen, const char *code,
		  const char *argname)
{
	char	   *names = pnstrdup(key, keylen);
	char	   *p = names;

	for (;;)
	{
		char	   *end = strchr(p, ',');
		char	   *name;
		int			len;
		RowKind		kind;
		int			k;
		bool		known = false;

		if (end)
			*end = '\0';
		while (*p == ' ' || *p == '\t')
			p++;
		len = strlen(p);
		while (len > 0 && (p[len - 1] == ' ' || p[len - 1] == '\t'))
			p[--len] = '\0';
		name = p;

		for (k = 0; k < ROWKIND_COUNT; k++)
			if (strcmp(name, rowkind_long_name((RowKind) k)) == 0)
			{
				kind = (RowKind) k;
				known = true;
			}
		if (!known)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("unknown change operation \"%s\" in %s", name, argname),
					 errhint("Operations are INSERT, UPDATE_BEFORE, UPDATE_AFTER and DELETE.")));
		if (m->mapped[kind])
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("duplicate change operation \"%s\" in %s", name, argname),
					 errdetail("Each operation may be mapped once.")));
		m->mapped[kind] = true;
		m->code[kind] = pstrdup(code);

		if (end == NULL)
			break;
		p = end + 1;
	}
	pfree(names);
}

void
op_mapping_from_jsonb(Jsonb *j, OpMapping *m, const char *argname)
{
	JsonbIterator *it;
	JsonbValue	v;
	JsonbIteratorToken tok;
	char	   *key = NULL;
	int			keylen = 0;

	memset(m, 0, sizeof(OpMapping));
	if (!JB_ROOT_IS_OBJECT(j))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must be a JSON object", argname),
				 errhint("For example '{\"INSERT, UPDATE_AFTER\": \"u\", \"DELETE\": \"d\"}'.")));

	it = JsonbIteratorInit(&j->root);
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
						 errmsg("codes in %s must be strings", argname)));
			map_kinds(m, key, keylen,
					  pnstrdup(v.val.string.val, v.val.string.len), argname);
		}
	}
}
