package postgres

// RoleTablesForTest lists the tables RolesSQL decides the service role's
// writes for, in the journal schema and in the key store schema.
func RoleTablesForTest() (journalTables, keyTables []string) {
	return sortedKeys(serviceJournalWrites), sortedKeys(serviceKeyWrites)
}
