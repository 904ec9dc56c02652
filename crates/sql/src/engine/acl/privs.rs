//! Privilege bits, their names, and at which levels each may be granted.
//! Stored as one integer per grant row (`store`).

use crate::types::SqlError;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct Privs(pub u64);

/// Levels a grant is made at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    Global,
    Db,
    Table,
    Column,
}

macro_rules! privs {
    ($($name:ident = $bit:expr, $text:expr, $levels:expr;)*) => {
        impl Privs {
            $(pub const $name: Privs = Privs(1 << $bit);)*
        }
        /// (bit, SQL name, levels it may be granted at), in SHOW GRANTS order.
        pub const ALL_PRIVS: &[(Privs, &str, &[Level])] = &[$((Privs::$name, $text, $levels),)*];
    };
}

use Level::*;
const TABLE_LEVELS: &[Level] = &[Global, Db, Table];
const COLUMN_LEVELS: &[Level] = &[Global, Db, Table, Column];
const DB_LEVELS: &[Level] = &[Global, Db];
const GLOBAL: &[Level] = &[Global];

privs! {
    SELECT = 0, "SELECT", COLUMN_LEVELS;
    INSERT = 1, "INSERT", COLUMN_LEVELS;
    UPDATE = 2, "UPDATE", COLUMN_LEVELS;
    DELETE = 3, "DELETE", TABLE_LEVELS;
    CREATE = 4, "CREATE", TABLE_LEVELS;
    DROP = 5, "DROP", TABLE_LEVELS;
    RELOAD = 6, "RELOAD", GLOBAL;
    PROCESS = 7, "PROCESS", GLOBAL;
    FILE = 8, "FILE", GLOBAL;
    INDEX = 9, "INDEX", TABLE_LEVELS;
    ALTER = 10, "ALTER", TABLE_LEVELS;
    SHOW_DATABASES = 11, "SHOW DATABASES", GLOBAL;
    SUPER = 12, "SUPER", GLOBAL;
    LOCK_TABLES = 13, "LOCK TABLES", DB_LEVELS;
    CREATE_VIEW = 14, "CREATE VIEW", TABLE_LEVELS;
    SHOW_VIEW = 15, "SHOW VIEW", TABLE_LEVELS;
    CREATE_USER = 16, "CREATE USER", GLOBAL;
    CREATE_ROLE = 17, "CREATE ROLE", GLOBAL;
    DROP_ROLE = 18, "DROP ROLE", GLOBAL;
    GRANT_OPTION = 30, "GRANT OPTION", TABLE_LEVELS;
}

impl Privs {
    pub const NONE: Privs = Privs(0);

    /// Everything grantable at `level` except GRANT OPTION (what ALL means there).
    pub fn all_at(level: Level) -> Privs {
        ALL_PRIVS
            .iter()
            .filter(|(p, _, lv)| *p != Privs::GRANT_OPTION && lv.contains(&level))
            .fold(Privs::NONE, |a, (p, _, _)| a | *p)
    }
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }
    pub fn contains(self, other: Privs) -> bool {
        self.0 & other.0 == other.0
    }
    pub fn intersects(self, other: Privs) -> bool {
        self.0 & other.0 != 0
    }
    pub fn without_grant_option(self) -> Privs {
        Privs(self.0 & !Privs::GRANT_OPTION.0)
    }
    pub fn minus(self, other: Privs) -> Privs {
        Privs(self.0 & !other.0)
    }
    /// Names in SHOW GRANTS order (GRANT OPTION left out: it is a clause there).
    pub fn names(self) -> Vec<&'static str> {
        ALL_PRIVS
            .iter()
            .filter(|(p, _, _)| *p != Privs::GRANT_OPTION && self.contains(*p))
            .map(|(_, n, _)| *n)
            .collect()
    }
    /// The privilege named `name` (upper-case words joined by one space).
    pub fn by_name(name: &str) -> Option<Privs> {
        ALL_PRIVS.iter().find(|(_, n, _)| *n == name).map(|(p, _, _)| *p)
    }
    /// Refuses privileges that cannot be granted at `level` (1144 / 1221 as MySQL).
    pub fn check_level(self, level: Level) -> Result<(), SqlError> {
        for (p, n, lv) in ALL_PRIVS {
            if self.contains(*p) && !lv.contains(&level) {
                return Err(match level {
                    Level::Column => SqlError::new(
                        1221,
                        "HY000",
                        format!("Incorrect usage of COLUMN GRANT and {n} (only SELECT, INSERT and UPDATE)"),
                    ),
                    _ => SqlError::new(
                        1144,
                        "42000",
                        format!("Illegal GRANT/REVOKE command: {n} is a global privilege; grant it ON *.*"),
                    ),
                });
            }
        }
        Ok(())
    }
}

impl std::ops::BitOr for Privs {
    type Output = Privs;
    fn bitor(self, o: Privs) -> Privs {
        Privs(self.0 | o.0)
    }
}

impl std::ops::BitOrAssign for Privs {
    fn bitor_assign(&mut self, o: Privs) {
        self.0 |= o.0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The data nodes check native clients' privileges with the bits this
    /// module stores (`norr_signals::acl`): the two must agree.
    #[test]
    fn bits_are_the_data_nodes() {
        use norr_signals::acl;
        let pairs = [
            (Privs::SELECT, acl::SELECT),
            (Privs::INSERT, acl::INSERT),
            (Privs::UPDATE, acl::UPDATE),
            (Privs::DELETE, acl::DELETE),
            (Privs::CREATE, acl::CREATE),
            (Privs::DROP, acl::DROP),
            (Privs::INDEX, acl::INDEX),
            (Privs::ALTER, acl::ALTER),
        ];
        for (p, bit) in pairs {
            assert_eq!(p.0, bit, "{}", acl::priv_name(bit));
        }
    }

    #[test]
    fn all_depends_on_level() {
        assert!(Privs::all_at(Level::Global).contains(Privs::SUPER));
        assert!(!Privs::all_at(Level::Db).contains(Privs::SUPER));
        assert!(Privs::all_at(Level::Table).contains(Privs::SELECT | Privs::CREATE_VIEW));
        assert_eq!(Privs::all_at(Level::Column), Privs::SELECT | Privs::INSERT | Privs::UPDATE);
        assert!(Privs::SUPER.check_level(Level::Db).is_err());
        assert!(Privs::DELETE.check_level(Level::Column).is_err());
        assert_eq!((Privs::SELECT | Privs::INSERT).names(), vec!["SELECT", "INSERT"]);
    }
}
