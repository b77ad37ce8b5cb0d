from django.db import migrations, models

# Trigram indexes for the admin's substring searches (Django's icontains is UPPER(column) LIKE
# UPPER('%word%'), so each indexes UPPER(column)): a reference's text, an instance's instruction, and
# an image's name, link, author and licence in one index, which PostgreSQL reads for any of the
# four. PostgreSQL only: SQLite (`make run`) has no GIN indexes and searches by reading its rows.
# Built CONCURRENTLY, outside a transaction, so workers keep submitting while they are made.
TRIGRAM_INDEXES = {
    "reference_text_trgm_idx": ("annotation_reference", ["text"]),
    "instance_instruction_trgm_idx": ("annotation_instance", ["instruction"]),
    "image_asset_search_trgm_idx": ("annotation_imageasset", ["original_name", "url", "author", "licence"]),
}


def create_trigram_indexes(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    # What django.contrib.postgres's TrigramExtension does, whose reverse fails on SQLite. Going
    # back leaves the extension: other indexes may have come to use it.
    schema_editor.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
    for name, (table, columns) in TRIGRAM_INDEXES.items():
        expressions = ", ".join(f"(UPPER({schema_editor.quote_name(column)})) gin_trgm_ops" for column in columns)
        schema_editor.execute(f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {schema_editor.quote_name(name)} "
                              f"ON {schema_editor.quote_name(table)} USING gin ({expressions})")


def drop_trigram_indexes(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    for name in TRIGRAM_INDEXES:
        schema_editor.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {schema_editor.quote_name(name)}")


class Migration(migrations.Migration):
    """Indexes for the admin's searches at campaign size: a work unit's key (pasted whole), and
    trigram indexes for words in long texts."""

    atomic = False

    dependencies = [
        ("annotation", "0028_model_response_name_indexes"),
    ]

    operations = [
        migrations.RunPython(create_trigram_indexes, drop_trigram_indexes),
        # IF NOT EXISTS: the benchmark world (benchmarks/scale.py) may have it already.
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunSQL(
                'CREATE INDEX IF NOT EXISTS "work_unit_key_idx" ON "annotation_workunit" ("key")',
                'DROP INDEX IF EXISTS "work_unit_key_idx"')],
            state_operations=[migrations.AddIndex(
                model_name="workunit", index=models.Index(fields=["key"], name="work_unit_key_idx"))],
        ),
    ]
