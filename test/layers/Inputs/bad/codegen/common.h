/* 4.10 is above 4.3 */
