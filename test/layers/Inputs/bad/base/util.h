/* fine: nothing to include */
