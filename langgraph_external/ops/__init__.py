"""Operations on a whole record: verify, repair, restore, transfer, prune, database roles."""
