"""The keyed table behind every list screen: rows may arrive before its mount handler ran."""

from __future__ import annotations

from textual.app import App

from promptui.widgets.keyed_table import Col, KeyedTable


async def test_sync_before_mount_adds_the_columns_first() -> None:
    # A screen's first refresh can reach sync() before the table's on_mount (CI saw
    # "More values provided than there are columns" on the incidents screen).
    app: App[None] = App()
    async with app.run_test(size=(80, 24)) as pilot:
        table = KeyedTable([Col("id", "ID", 8), Col("name", "Name", None)])
        table.sync([("a", ("a1", "alpha")), ("b", ("b1", "beta"))])
        assert [str(c.label) for c in table.ordered_columns] == ["ID", "Name"]
        await app.mount(table)  # its mount handler comes late and must not add them twice
        await pilot.pause()
        assert len(table.ordered_columns) == 2
        assert table.keys == ["a", "b"]
